package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime/stime in /proc/<pid>/stat. Linux fixes USER_HZ at 100
// for user space on every architecture the benchmark runs on.
const clockTick = 10 * time.Millisecond

// ErrFormat reports a /proc file that does not look like the kernel's.
var ErrFormat = errors.New("procstat: unexpected /proc format")

// CPU returns the user+system CPU time the process has used so far (10 ms resolution).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return ParseStatCPU(b)
}

// ParseStatCPU extracts utime+stime from the contents of /proc/<pid>/stat. The command
// name may contain spaces and parentheses, so fields are counted after its last ')'.
func ParseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command name in stat", ErrFormat)
	}
	// After ")": field 3 (state) is index 0, so utime (field 14) is index 11 and
	// stime (field 15) index 12.
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%w: %d fields after command name", ErrFormat, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// RSS returns the process's resident set size in bytes (VmRSS).
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	defer f.Close()
	return ParseStatusRSS(f)
}

// ParseStatusRSS extracts VmRSS (reported in kB) from the contents of /proc/<pid>/status.
func ParseStatusRSS(status io.Reader) (int64, error) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%w: VmRSS line %q", ErrFormat, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return 0, fmt.Errorf("%w: no VmRSS line", ErrFormat)
}
