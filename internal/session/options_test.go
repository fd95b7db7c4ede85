package session

import "testing"

func TestParseMode(t *testing.T) {
	tests := map[string]struct {
		want    Mode
		wantErr bool
	}{
		"always": {SyncAlways, false},
		"none":   {SyncNone, false},
		"":       {SyncAlways, true},
		"fsync":  {SyncAlways, true},
	}
	for in, tc := range tests {
		t.Run(in, func(t *testing.T) {
			got, err := ParseMode(in)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("ParseMode(%q) = %v, %v, want %v, error %v", in, got, err, tc.want, tc.wantErr)
			}
			if err == nil && got.String() != in {
				t.Errorf("ParseMode(%q).String() = %q, want %q", in, got.String(), in)
			}
		})
	}
}
