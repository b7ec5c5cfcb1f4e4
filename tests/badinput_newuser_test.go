package tests

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// What a new user tripped on (issue 25, "Tried as a new user would"),
// each as the user met it: the compose file, the README's and the
// OpenAPI document's examples, the logs.

// The compose demo runs without API_KEY: every port it publishes is on the
// host's loopback, every image is a released version (Mailpit was
// :latest), and the README says the stop_grace_period the file has (it
// said 5m where the file has 6m).
func TestComposePublishesOnLoopbackAndPinsImages(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	compose := string(raw)
	// Published ports are the list items under a ports: key.
	var ports []string
	lines := strings.Split(compose, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "ports:" {
			continue
		}
		for _, item := range lines[i+1:] {
			spec, ok := strings.CutPrefix(strings.TrimSpace(item), "- ")
			if !ok {
				break
			}
			ports = append(ports, strings.Trim(spec, `"'`))
		}
	}
	if len(ports) == 0 {
		t.Fatal("docker-compose.yml publishes no port: the test reads it wrong")
	}
	for _, spec := range ports {
		if !strings.HasPrefix(spec, "127.0.0.1:") {
			t.Errorf("port %q is published on every interface of the host, want 127.0.0.1:…", spec)
		}
	}
	images := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`).FindAllStringSubmatch(compose, -1)
	sawMailpit := false
	for _, m := range images {
		image := m[1]
		if image == "nornweave:local" { // built by the file itself
			continue
		}
		name, tag, ok := strings.Cut(image, ":")
		if !ok || tag == "latest" || tag == "" {
			t.Errorf("image %q is not pinned to a version", image)
		}
		if name == "axllent/mailpit" {
			sawMailpit = true
			if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(tag) {
				t.Errorf("Mailpit's tag %q is not a released version vX.Y.Z", tag)
			}
		}
	}
	if !sawMailpit {
		t.Error("docker-compose.yml has no axllent/mailpit image: the test reads it wrong")
	}

	grace := regexp.MustCompile(`(?m)^\s*stop_grace_period:\s*(\S+)`).FindAllStringSubmatch(compose, -1)
	if len(grace) != 1 {
		t.Fatalf("docker-compose.yml sets stop_grace_period %d times, want once (shared by both servers)", len(grace))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	said := regexp.MustCompile("stop_grace_period: ?([0-9a-z]+)").FindAllStringSubmatch(string(readme), -1)
	if len(said) == 0 {
		t.Fatal("the README never says the compose file's stop_grace_period")
	}
	for _, m := range said {
		if m[1] != grace[0][1] {
			t.Errorf("the README says stop_grace_period: %s, the compose file has %s", m[1], grace[0][1])
		}
	}
}
