package hold

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// River's INFO lines (its producer's job counts every 15 s, a maintenance
// service's "Ran successfully") reach the log at DEBUG; its warnings and
// errors keep their level, and an INFO log shows none of the routine.
func TestRiverRoutineIsDebug(t *testing.T) {
	var buf bytes.Buffer
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		buf.Reset()
		log := slog.New(routine{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})}).With("component", "river")
		log.InfoContext(context.Background(), "producer: Producer job counts")
		log.Warn("elector: Error attempting to elect")
		out := buf.String()
		switch level {
		case slog.LevelDebug:
			if !strings.Contains(out, `level=DEBUG msg="producer: Producer job counts" component=river`) {
				t.Errorf("at DEBUG, River's INFO line reads %q, want it at DEBUG", out)
			}
		case slog.LevelInfo:
			if strings.Contains(out, "Producer job counts") {
				t.Errorf("at INFO, River's routine line was logged: %q", out)
			}
		}
		if !strings.Contains(out, "level=WARN") {
			t.Errorf("River's warning lost its level: %q", out)
		}
	}
}
