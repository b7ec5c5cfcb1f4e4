package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Var is one configuration variable as the Config struct declares it: its
// environment name, its default and its Go kind. The command line derives
// one flag from each (PORT is --port), so the two cannot drift apart.
type Var struct {
	Name    string // the environment variable, e.g. "SMTP_USE_TLS"
	Default string // the default tag, "" when none
	Bool    bool   // a boolean: its flag may be given without a value
	Secret  bool   // a password or key: never printed
	field   int
}

// Flag is the command-line flag of the variable: "smtp-use-tls".
func (v Var) Flag() string { return strings.ReplaceAll(strings.ToLower(v.Name), "_", "-") }

// Vars lists every variable in the order Config declares them.
func Vars() []Var {
	t := reflect.TypeFor[Config]()
	vars := make([]Var, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		vars = append(vars, Var{Name: name, Default: f.Tag.Get("default"), Bool: f.Type.Kind() == reflect.Bool,
			Secret: isSecret(name), field: i})
	}
	return vars
}

func isSecret(name string) bool {
	for _, s := range []string{"PASSWORD", "API_KEY", "SECRET"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// LoadWith is Load with overrides (variable name → value, from the command
// line) that win over the environment and .env. Every value that cannot be
// parsed is reported, all at once, and that variable keeps its default, so
// the caller can still run Validate and report the rest in the same message.
func LoadWith(dotenvPath string, overrides map[string]string) (Config, error) {
	var c Config
	var errs []error
	if err := readDotenv(dotenvPath); err != nil {
		errs = append(errs, err)
	}
	v := reflect.ValueOf(&c).Elem()
	for _, cv := range Vars() {
		raw, set := overrides[cv.Name]
		if !set {
			raw, set = os.LookupEnv(cv.Name)
		}
		// Unset and set-but-empty both mean the default: compose files and
		// .env templates often carry "PORT=", which must not mean port 0.
		if !set || strings.TrimSpace(raw) == "" {
			raw = cv.Default
		}
		if err := setValue(v.Field(cv.field), raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: cannot parse %q as %s", cv.Name, raw, err))
			_ = setValue(v.Field(cv.field), cv.Default)
		}
	}
	c.normalize()
	return c, errors.Join(errs...)
}

// setValue parses raw into f; the error names the expected type. These are
// the parsers envconfig applies, so values that worked before still work.
func setValue(f reflect.Value, raw string) error {
	raw = strings.TrimSpace(raw)
	switch f.Interface().(type) {
	case string:
		f.SetString(raw)
	case bool:
		if raw == "" {
			f.SetBool(false)
			return nil
		}
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("a boolean (true or false)")
		}
		f.SetBool(b)
	case int:
		if raw == "" {
			f.SetInt(0)
			return nil
		}
		n, err := strconv.ParseInt(raw, 0, 64)
		if err != nil {
			return errors.New("an integer")
		}
		f.SetInt(n)
	case time.Duration:
		if raw == "" {
			f.SetInt(0)
			return nil
		}
		d, err := time.ParseDuration(raw)
		if err != nil {
			return errors.New("a duration such as 30s")
		}
		f.SetInt(int64(d))
	default:
		return fmt.Errorf("an unsupported type %s", f.Type())
	}
	return nil
}
