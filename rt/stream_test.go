package rt

import (
	"testing"
	"time"
)

func TestLaunchTimes(t *testing.T) {
	var l LaunchTimes
	if got := l.Get(); got != nil {
		t.Errorf("zero LaunchTimes: Get = %v, want nil", got)
	}
	l.Set([]time.Duration{})
	if got := l.Get(); got != nil {
		t.Errorf("no launches: Get = %v, want nil", got)
	}
	l.Set([]time.Duration{3, 5})
	got := l.Get()
	if len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("Get = %v, want [3 5]", got)
	}
	got[0] = 7 // a copy: the stream's times stay as they are
	if again := l.Get(); again[0] != 3 {
		t.Errorf("Get returned the stored slice itself: %v", again)
	}
	l.Set(nil)
	if got := l.Get(); got != nil {
		t.Errorf("after Set(nil): Get = %v", got)
	}
}
