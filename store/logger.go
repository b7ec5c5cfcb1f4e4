package store

import (
	"context"
	"log/slog"
	"time"

	gormlogger "gorm.io/gorm/logger"
)

// slowQuery is how long a statement may take before it is logged.
const slowQuery = 200 * time.Millisecond

// gormLogger bridges gorm to slog, reporting only slow statements at WARN.
// Failed statements are not logged here: their errors are returned to the
// caller, which decides whether they matter (a duplicate inbox is a 409,
// not an incident). Statements are logged without their arguments, which
// hold message bodies and addresses.
type gormLogger struct {
	log   *slog.Logger
	slow  time.Duration
	trace func(ctx context.Context, sql string) // Options.Trace
}

func newGormLogger(log *slog.Logger, slow time.Duration, trace func(context.Context, string)) *gormLogger {
	return &gormLogger{log: log, slow: slow, trace: trace}
}

// LogMode implements gorm's logger.Interface; the level is fixed.
func (l *gormLogger) LogMode(gormlogger.LogLevel) gormlogger.Interface { return l }

// Info implements gorm's logger.Interface; gorm's chatter is dropped.
func (l *gormLogger) Info(context.Context, string, ...any) {}

// Warn implements gorm's logger.Interface.
func (l *gormLogger) Warn(ctx context.Context, msg string, args ...any) {
	l.log.WarnContext(ctx, "gorm warning", slog.String("detail", msg), slog.Any("args", args))
}

// Error implements gorm's logger.Interface.
func (l *gormLogger) Error(ctx context.Context, msg string, args ...any) {
	l.log.ErrorContext(ctx, "gorm error", slog.String("detail", msg), slog.Any("args", args))
}

// Trace implements gorm's logger.Interface.
func (l *gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	elapsed := time.Since(begin)
	if l.trace != nil {
		sql, _ := fc()
		l.trace(ctx, sql)
	}
	if elapsed < l.slow {
		return
	}
	sql, rows := fc()
	l.log.WarnContext(ctx, "slow query",
		slog.Int64("duration_ms", elapsed.Milliseconds()),
		slog.Int64("rows", rows),
		slog.String("sql", sql))
}

// ParamsFilter implements gorm.ParamsFilter so that Trace sees the
// statement with placeholders, never the values bound to them.
func (l *gormLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
