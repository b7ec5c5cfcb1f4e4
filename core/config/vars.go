package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// Var is one configuration variable as the Config struct declares it: its
// environment name, its default and its Go kind. The command line derives
// one flag from each (PORT is --port), so the two cannot drift apart.
type Var struct {
	Name    string // the environment variable, e.g. "SMTP_USE_TLS"
	Default string // the default tag, "" when none
	Bool    bool   // a boolean: its flag may be given without a value
	Secret  bool   // a password or key: never printed
}

// Flag is the command-line flag of the variable: "smtp-use-tls".
func (v Var) Flag() string { return strings.ReplaceAll(strings.ToLower(v.Name), "_", "-") }

// Vars lists every variable in the order Config declares them, those of
// nested and embedded structs (Throttle) included, where they appear.
func Vars() []Var { return varsOf(reflect.TypeFor[Config]()) }

// varsOf walks t depth-first: a field with an envconfig tag is a variable;
// a struct field without one (and without a decoder of its own, which no
// field of Config has) is walked into, as envconfig does.
func varsOf(t reflect.Type) []Var {
	var vars []Var
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			if f.Type.Kind() == reflect.Struct {
				vars = append(vars, varsOf(f.Type)...)
			}
			continue
		}
		vars = append(vars, Var{Name: name, Default: f.Tag.Get("default"), Bool: f.Type.Kind() == reflect.Bool,
			Secret: isSecret(name)})
	}
	return vars
}

func isSecret(name string) bool {
	for _, s := range []string{"PASSWORD", "API_KEY", "SECRET", "SIGNING_KEY", "IMAP_URL"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// LoadWith is Load with overrides (variable name → value, from the command
// line) that win over the environment and .env. envconfig reads the values;
// every value it cannot parse is reported, all at once, and that variable
// keeps its default, so the caller can still run Validate and report the
// rest in the same message. Set-but-empty variables mean their default:
// compose files and .env templates often carry "PORT=", which must not mean
// port 0. The process environment is as it was when LoadWith returns.
func LoadWith(dotenvPath string, overrides map[string]string) (Config, error) {
	var errs []error
	if err := readDotenv(dotenvPath); err != nil {
		errs = append(errs, err)
	}
	env := newEnvEdit()
	defer env.restore()
	for _, v := range Vars() {
		if raw, ok := overrides[v.Name]; ok {
			env.set(v.Name, raw)
		}
		if raw, ok := os.LookupEnv(v.Name); ok && strings.TrimSpace(raw) == "" {
			env.unset(v.Name)
		}
	}
	var c Config
	for {
		err := envconfig.Process("", &c)
		var pe *envconfig.ParseError
		if !errors.As(err, &pe) {
			if err != nil {
				errs = append(errs, fmt.Errorf("config: %w", err))
			}
			break
		}
		errs = append(errs, fmt.Errorf("%s: cannot parse %q as %s", pe.KeyName, pe.Value, typeName(pe.TypeName)))
		env.unset(pe.KeyName) // its default, so that the rest is read and checked
		c = Config{}
	}
	c.normalize()
	return c, errors.Join(errs...)
}

// typeName words envconfig's Go type name for the user.
func typeName(goType string) string {
	switch goType {
	case "bool":
		return "a boolean (true or false)"
	case "int":
		return "an integer"
	case "Duration", "time.Duration":
		return "a duration such as 30s"
	}
	return goType
}

// envEdit changes the process environment for the time envconfig reads it,
// and puts it back.
type envEdit struct{ saved map[string]*string }

func newEnvEdit() *envEdit { return &envEdit{saved: map[string]*string{}} }

func (e *envEdit) save(k string) {
	if _, done := e.saved[k]; done {
		return
	}
	if v, ok := os.LookupEnv(k); ok {
		e.saved[k] = &v
	} else {
		e.saved[k] = nil
	}
}

func (e *envEdit) set(k, v string) { e.save(k); _ = os.Setenv(k, v) }
func (e *envEdit) unset(k string)  { e.save(k); _ = os.Unsetenv(k) }

func (e *envEdit) restore() {
	for k, v := range e.saved {
		if v == nil {
			_ = os.Unsetenv(k)
		} else {
			_ = os.Setenv(k, *v)
		}
	}
}
