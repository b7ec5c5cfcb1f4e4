package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// OpenAPIDocument is the API's OpenAPI 3.1 description, written by hand
// next to the handlers it describes; tests fail when it and the routes
// disagree, and the end-to-end tests validate real responses against it.
//
//go:embed openapi.json
var OpenAPIDocument []byte

func (a *API) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPIDocument)
}

// docs serves the document as one self-contained HTML page rendered here on
// the server: it works offline and behind a strict CSP, with no JavaScript
// renderer to vendor or CDN to reach.
func (a *API) docs(c echo.Context) error {
	page, err := docsPage()
	if err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, page)
}

var docsPage = sync.OnceValues(func() ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(OpenAPIDocument, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	var b strings.Builder
	if err := docsTemplate.Execute(&b, newDocsView(doc)); err != nil {
		return nil, fmt.Errorf("api: render docs: %w", err)
	}
	return []byte(b.String()), nil
})

// The view of the document the page shows.
type (
	docsView struct {
		Title, Description string
		Operations         []docsOperation
		Schemas            []docsSchema
	}
	docsOperation struct {
		Method, Path, Summary, Description, Body string
		Parameters                               []docsField
		Responses                                []docsField
	}
	docsSchema struct {
		Name, Description string
		Fields            []docsField
	}
	docsField struct{ Name, Type, Required, Description string }
)

var methodOrder = []string{"get", "head", "post", "put", "patch", "delete"}

func newDocsView(doc map[string]any) docsView {
	info, comps := docObj(doc["info"]), docObj(doc["components"])
	v := docsView{Title: docStr(info["title"]), Description: docStr(info["description"])}
	paths := docObj(doc["paths"])
	for _, p := range sortedKeys(paths) {
		item := docObj(paths[p])
		for _, m := range methodOrder {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			o := docsOperation{Method: strings.ToUpper(m), Path: p, Summary: docStr(op["summary"]),
				Description: docStr(op["description"])}
			params := append(docArr(item["parameters"]), docArr(op["parameters"])...)
			for _, pr := range params {
				pm := resolve(comps, docObj(pr))
				o.Parameters = append(o.Parameters, docsField{Name: docStr(pm["name"]), Type: docStr(pm["in"]) + " " +
					typeOf(docObj(pm["schema"])), Required: docYes(pm["required"] == true), Description: docStr(pm["description"])})
			}
			if rb := docObj(op["requestBody"]); rb != nil {
				for _, media := range docObj(rb["content"]) {
					o.Body = typeOf(docObj(docObj(media)["schema"]))
				}
			}
			resps := docObj(op["responses"])
			for _, code := range sortedKeys(resps) {
				r := resolve(comps, docObj(resps[code]))
				typ := ""
				for _, media := range docObj(r["content"]) {
					typ = typeOf(docObj(docObj(media)["schema"]))
				}
				desc := docStr(r["description"])
				if hs := sortedKeys(docObj(r["headers"])); len(hs) > 0 {
					desc += " Headers: " + strings.Join(hs, ", ") + "."
				}
				o.Responses = append(o.Responses, docsField{Name: code, Type: typ, Description: desc})
			}
			v.Operations = append(v.Operations, o)
		}
	}
	schemas := docObj(comps["schemas"])
	for _, name := range sortedKeys(schemas) {
		s := docObj(schemas[name])
		ds := docsSchema{Name: name, Description: docStr(s["description"])}
		props := docObj(s["properties"])
		required := map[string]bool{}
		for _, r := range docArr(s["required"]) {
			required[docStr(r)] = true
		}
		for _, p := range sortedKeys(props) {
			ps := docObj(props[p])
			ds.Fields = append(ds.Fields, docsField{Name: p, Type: typeOf(ps), Required: docYes(required[p]),
				Description: docStr(ps["description"])})
		}
		v.Schemas = append(v.Schemas, ds)
	}
	return v
}

// typeOf words a schema for a reader: "string", "[Attachment] | null", "Inbox".
func typeOf(s map[string]any) string {
	if ref := docStr(s["$ref"]); ref != "" {
		return ref[strings.LastIndex(ref, "/")+1:]
	}
	if c, ok := s["const"]; ok {
		return fmt.Sprintf("%q", fmt.Sprint(c))
	}
	if e := docArr(s["enum"]); e != nil {
		parts := make([]string, len(e))
		for i, x := range e {
			parts[i] = fmt.Sprintf("%q", fmt.Sprint(x))
		}
		return strings.Join(parts, " | ")
	}
	alts := docArr(s["oneOf"])
	if alts == nil {
		alts = docArr(s["anyOf"])
	}
	if alts != nil {
		parts := make([]string, len(alts))
		for i, x := range alts {
			parts[i] = typeOf(docObj(x))
		}
		return strings.Join(parts, " | ")
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, docStr(x))
		}
	}
	for i, t := range types {
		if t == "array" {
			types[i] = "[" + typeOf(docObj(s["items"])) + "]"
		}
	}
	return strings.Join(types, " | ")
}

func resolve(comps, o map[string]any) map[string]any {
	ref := docStr(o["$ref"])
	if ref == "" {
		return o
	}
	parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
	if len(parts) != 2 {
		return o
	}
	return docObj(docObj(comps[parts[0]])[parts[1]])
}

func docObj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func docArr(v any) []any          { a, _ := v.([]any); return a }
func docStr(v any) string         { s, _ := v.(string); return s }

func docYes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var docsTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} API</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code,.m{font-family:ui-monospace,monospace}section{border-top:1px solid #ddd;padding:.5rem 0}
.m{display:inline-block;min-width:4.5rem;font-weight:bold}table{border-collapse:collapse;margin:.3rem 0 .8rem}
td,th{border:1px solid #ddd;padding:.15rem .5rem;text-align:left;vertical-align:top}th{background:#f5f5f5}
</style></head><body>
<h1>{{.Title}} API</h1><p>{{.Description}}</p>
<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
<h2>Endpoints</h2>
{{range .Operations}}<section id="{{.Method}}{{.Path}}"><h3><span class="m">{{.Method}}</span> <code>{{.Path}}</code></h3>
<p>{{.Summary}}.{{if .Description}} {{.Description}}{{end}}</p>
{{if .Parameters}}<table><tr><th>Parameter</th><th>Where and type</th><th>Required</th><th></th></tr>
{{range .Parameters}}<tr><td><code>{{.Name}}</code></td><td>{{.Type}}</td><td>{{.Required}}</td><td>{{.Description}}</td></tr>{{end}}</table>{{end}}
{{if .Body}}<p>Request body: <a href="#schema-{{.Body}}"><code>{{.Body}}</code></a></p>{{end}}
<table><tr><th>Status</th><th>Body</th><th></th></tr>
{{range .Responses}}<tr><td>{{.Name}}</td><td><code>{{.Type}}</code></td><td>{{.Description}}</td></tr>{{end}}</table></section>
{{end}}
<h2>Schemas</h2>
{{range .Schemas}}<section id="schema-{{.Name}}"><h3><code>{{.Name}}</code></h3>{{if .Description}}<p>{{.Description}}</p>{{end}}
<table><tr><th>Field</th><th>Type</th><th>Required</th><th></th></tr>
{{range .Fields}}<tr><td><code>{{.Name}}</code></td><td><code>{{.Type}}</code></td><td>{{.Required}}</td><td>{{.Description}}</td></tr>{{end}}</table></section>
{{end}}</body></html>
`))
