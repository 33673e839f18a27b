// Package history records what the chaos harness's clients and nemesis did:
// Jepsen-style operations, each an invoke followed by ok, fail or info from
// the same process, stamped with monotonic times since the test began.
//
// The rules (../shared/research/chaos.md, section 2): ok means the
// operation took effect; fail means it certainly did not; info means nobody
// knows (a timeout, a dropped connection, a 5xx), and the process that saw
// it never issues another operation — its worker goes on as a new process.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Type is an operation's kind of history entry.
type Type string

// The history entry types.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// NemesisProcess is the process of nemesis entries.
const NemesisProcess = -1

// Op is one history entry.
type Op struct {
	Index    int    `json:"index"`
	Process  int    `json:"process"`
	Type     Type   `json:"type"`
	F        string `json:"f"`
	Workload string `json:"workload,omitempty"`
	Node     string `json:"node,omitempty"`
	// Key is the code the operation is about: the alias of a register
	// operation, or the code a create returned.
	Key string `json:"key,omitempty"`
	// Value is the URL written, or the URL a read saw.
	Value string `json:"value,omitempty"`
	// Status is the HTTP status of the answer, if any.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Time is nanoseconds since the test began (monotonic clock).
	Time int64 `json:"time"`
}

// Recorder appends operations from many goroutines.
type Recorder struct {
	start time.Time

	mu   sync.Mutex
	ops  []Op
	next int // next process id
}

// NewRecorder starts the clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the test began.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// NewProcess returns a process id no one has used.
func (r *Recorder) NewProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.next
	r.next++
	return p
}

// Invoke records op as invoked now and returns it as recorded.
func (r *Recorder) Invoke(op Op) Op {
	op.Type = Invoke
	return r.add(op)
}

// Complete records the completion of inv: typ with the fields of res that
// are set (Key, Value, Status, Error).
func (r *Recorder) Complete(inv Op, typ Type, res Op) Op {
	op := inv
	op.Type = typ
	if res.Key != "" {
		op.Key = res.Key
	}
	op.Value = res.Value
	op.Status = res.Status
	op.Error = res.Error
	return r.add(op)
}

// Add records op as given, stamped now.
func (r *Recorder) Add(op Op) Op { return r.add(op) }

func (r *Recorder) add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The time is taken under the lock, so times never go backwards along
	// the history.
	op.Time = int64(time.Since(r.start))
	op.Index = len(r.ops)
	r.ops = append(r.ops, op)
	return op
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Pair is an invocation and its completion (nil while it has none).
type Pair struct {
	Invoke     Op
	Completion *Op
}

// Pairs matches every invocation with its process's next entry. It fails if
// a process invokes twice without completing, or completes what it never
// invoked: a harness bug, not a property of the system under test.
func Pairs(ops []Op) ([]Pair, error) {
	open := map[int]int{} // process -> index in out
	var out []Pair
	for _, op := range ops {
		if op.Process == NemesisProcess {
			continue
		}
		switch op.Type {
		case Invoke:
			if _, busy := open[op.Process]; busy {
				return nil, fmt.Errorf("process %d invoked op %d with one open", op.Process, op.Index)
			}
			open[op.Process] = len(out)
			out = append(out, Pair{Invoke: op})
		default:
			i, ok := open[op.Process]
			if !ok {
				return nil, fmt.Errorf("process %d completed op %d without invoking", op.Process, op.Index)
			}
			c := op
			out[i].Completion = &c
			delete(open, op.Process)
		}
	}
	return out, nil
}

// WriteJSONL writes one JSON object per line.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads what WriteJSONL wrote.
func ReadJSONL(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var op Op
		if err := dec.Decode(&op); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
}

// ReadFile reads a history.jsonl file.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadJSONL(f)
}

// WriteEDN writes the history the way Jepsen's history.edn looks, one map
// per line: {:index 0, :time 123, :type :invoke, :process 0, :f :create,
// :value [...]}, for people who read Jepsen histories.
func WriteEDN(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	for _, op := range ops {
		process := strconv.Itoa(op.Process)
		if op.Process == NemesisProcess {
			process = ":nemesis"
		}
		fmt.Fprintf(bw, "{:index %d, :time %d, :type :%s, :process %s, :f :%s", op.Index, op.Time, op.Type, process, keyword(op.F))
		if op.Workload != "" {
			fmt.Fprintf(bw, ", :workload :%s", keyword(op.Workload))
		}
		if op.Node != "" {
			fmt.Fprintf(bw, ", :node %s", ednString(op.Node))
		}
		fmt.Fprintf(bw, ", :value [%s %s]", ednNilString(op.Key), ednNilString(op.Value))
		if op.Status != 0 {
			fmt.Fprintf(bw, ", :status %d", op.Status)
		}
		if op.Error != "" {
			fmt.Fprintf(bw, ", :error %s", ednString(op.Error))
		}
		bw.WriteString("}\n")
	}
	return bw.Flush()
}

func keyword(s string) string {
	if s == "" {
		return "nil"
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == ',' {
			return '-'
		}
		return r
	}, s)
}

func ednNilString(s string) string {
	if s == "" {
		return "nil"
	}
	return ednString(s)
}

func ednString(s string) string {
	// EDN strings escape like Go's, for the characters that can appear here.
	return strconv.Quote(s)
}
