package seslimits

import (
	"math"
	"testing"

	"github.com/nornweave/nornweave/providers"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		q                 providers.SESQuota
		margin            float64
		perSecond, perDay int
	}{
		{"documented example", providers.SESQuota{MaxSendRate: 14, Max24HourSend: 50000, SentLast24Hours: 120}, 0.9, 12, 45000},
		{"margin 1 is the quota", providers.SESQuota{MaxSendRate: 14, Max24HourSend: 50000}, 1, 14, 50000},
		{"sandbox: 1/s never rounds to unlimited", providers.SESQuota{MaxSendRate: 1, Max24HourSend: 200}, 0.9, 1, 180},
		{"under 1/s is 1", providers.SESQuota{MaxSendRate: 0.5, Max24HourSend: 1}, 0.5, 1, 1},
		{"no 24-hour quota (-1) is unlimited", providers.SESQuota{MaxSendRate: 14, Max24HourSend: -1}, 0.9, 12, 0},
		{"zero is unlimited", providers.SESQuota{}, 0.9, 0, 0},
		{"an exact product is not lost to floating point", providers.SESQuota{MaxSendRate: 100, Max24HourSend: 100}, 0.29, 29, 29},
		{"rounds down", providers.SESQuota{MaxSendRate: 19, Max24HourSend: 99999}, 0.9, 17, 89999},
		{"SentLast24Hours is not subtracted", providers.SESQuota{MaxSendRate: 10, Max24HourSend: 1000, SentLast24Hours: 999}, 1, 10, 1000},
		{"beyond any int32", providers.SESQuota{MaxSendRate: 1e12, Max24HourSend: math.Inf(1)}, 1, math.MaxInt32, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perSecond, perDay := Limits(tt.q, tt.margin)
			if perSecond != tt.perSecond || perDay != tt.perDay {
				t.Errorf("Limits(%+v, %v) = %d, %d; want %d, %d", tt.q, tt.margin, perSecond, perDay, tt.perSecond, tt.perDay)
			}
		})
	}
}

func TestCheckMargin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		margin float64
		ok     bool
	}{
		{0.9, true}, {1, true}, {0.01, true},
		{0, false}, {-0.5, false}, {1.5, false}, {1.0000001, false}, {math.NaN(), false}, {math.Inf(1), false},
	}
	for _, tt := range tests {
		if err := CheckMargin(tt.margin); (err == nil) != tt.ok {
			t.Errorf("CheckMargin(%v) = %v, want ok %v", tt.margin, err, tt.ok)
		}
	}
}
