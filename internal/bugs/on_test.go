//go:build jepsenbugs

package bugs

import "testing"

func TestOnOnceEvery(t *testing.T) {
	// The environment is read once per process: this test sets it first.
	t.Setenv(Env, RetryNewCode+","+PanicOnce)
	if !On(RetryNewCode) || On(EarlyAck) {
		t.Fatal("On does not follow the environment")
	}
	if !Once(PanicOnce) || Once(PanicOnce) {
		t.Fatal("Once is not true exactly once")
	}
	var hits []int
	for i := 1; i <= 10; i++ {
		if Every(RetryNewCode, 5) {
			hits = append(hits, i)
		}
	}
	if len(hits) != 2 || hits[0] != 5 || hits[1] != 10 {
		t.Fatalf("Every(5) fired on calls %v", hits)
	}
	if Every(EarlyAck, 1) {
		t.Fatal("Every fired for a fault that is off")
	}
}
