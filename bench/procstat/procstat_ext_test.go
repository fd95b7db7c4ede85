package procstat_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/bench/procstat"
)

func TestParseStatCPU(t *testing.T) {
	tests := map[string]struct {
		stat    string
		want    time.Duration
		wantErr bool
	}{
		"plain": {
			stat: "42 (toolsd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 1 1",
			want: 3 * time.Second,
		},
		"name with spaces and parens": {
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1",
			want: 30 * time.Millisecond,
		},
		"truncated": {stat: "7 (x) R 1 2 3", wantErr: true},
		"no name":   {stat: "7 x R", wantErr: true},
		"not a number": {
			stat:    "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 2 0",
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := procstat.ParseStatCPU([]byte(tc.stat))
			if tc.wantErr {
				if !errors.Is(err, procstat.ErrFormat) {
					t.Fatalf("ParseStatCPU(%q) error = %v, want ErrFormat", tc.stat, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseStatCPU(%q) = %v, %v, want %v", tc.stat, got, err, tc.want)
			}
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	tests := map[string]struct {
		status  string
		want    int64
		wantErr bool
	}{
		"present":  {status: "Name:\ttoolsd\nVmPeak:\t 9 kB\nVmRSS:\t   2048 kB\nThreads:\t9\n", want: 2048 * 1024},
		"missing":  {status: "Name:\ttoolsd\n", wantErr: true},
		"bad unit": {status: "VmRSS:\t 12 MB\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := procstat.ParseStatusRSS(strings.NewReader(tc.status))
			if tc.wantErr {
				if !errors.Is(err, procstat.ErrFormat) {
					t.Fatalf("ParseStatusRSS(%q) error = %v, want ErrFormat", tc.status, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseStatusRSS(%q) = %d, %v, want %d", tc.status, got, err, tc.want)
			}
		})
	}
}

func TestSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := procstat.CPU(pid); err != nil {
		t.Fatalf("CPU(self) error = %v", err)
	}
	rss, err := procstat.RSS(pid)
	if err != nil || rss <= 0 {
		t.Fatalf("RSS(self) = %d, %v, want > 0", rss, err)
	}
}
