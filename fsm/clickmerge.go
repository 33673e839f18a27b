package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// get is Bucket.Get through a reused cursor.
func get(c *bolt.Cursor, key []byte) []byte {
	k, v := c.Seek(key)
	if !bytes.Equal(k, key) {
		return nil
	}
	return v
}

// applyClickBatch applies an encoded click batch that the registry's
// parse passed (command.ClickBatchBody).
func (f *ShardFSM) applyClickBatch(tx *bolt.Tx, body command.ClickBatchBody) (any, error) {
	node, seq, err := command.ReadClickBatch(body, nil)
	if err != nil {
		return nil, fmt.Errorf("click batch: %w", err) // parse passed it: not the entry
	}
	seqs := tx.Bucket(bucketClickSeq)
	if v := seqs.Get(node); len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
		return &command.ClickBatchResult{Duplicate: true}, nil
	}
	if err := seqs.Put(bytes.Clone(node), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return nil, fmt.Errorf("click batch: %w", err)
	}
	a := newClickApply(tx)
	n := 0
	if _, _, err := command.ReadClickBatch(body, func(d []byte) error {
		if n++; n%yieldEvery == 0 {
			// A batch of thousands of codes is a burst of CPU; redirects
			// waiting for a core go first now and then (the tail they see
			// is this burst's length).
			runtime.Gosched()
		}
		return f.applyClickDelta(a, d)
	}); err != nil {
		return nil, fmt.Errorf("click batch: %w", err)
	}
	return &command.ClickBatchResult{}, nil
}

// yieldEvery is how many deltas of a click batch are applied between
// yields of the processor.
const yieldEvery = 128

// clickApply holds one batch's buckets and scratch space.
type clickApply struct {
	tx            *bolt.Tx
	totals, hours *bolt.Bucket
	// Lookups go through one cursor per bucket (a Get makes a new cursor
	// each time); Seek repositions them after every Put.
	linkCur, totalsCur, hoursCur *bolt.Cursor
	delta                        command.Delta
	merger                       command.TotalsMerger
}

// newClickApply is the buckets and cursors of tx that deltas are added
// through.
func newClickApply(tx *bolt.Tx) *clickApply {
	a := &clickApply{tx: tx, totals: tx.Bucket(bucketClicks), hours: tx.Bucket(bucketClickHours)}
	a.linkCur, a.totalsCur, a.hoursCur = tx.Bucket(bucketLinks).Cursor(), a.totals.Cursor(), a.hours.Cursor()
	return a
}

// applyClickDelta adds one code's delta to its stored totals and hours.
func (f *ShardFSM) applyClickDelta(a *clickApply, body []byte) error {
	d := &a.delta
	if err := d.Parse(body); err != nil {
		return err
	}
	if err := a.merger.Add(d); err != nil {
		return err
	}
	// Clicks count toward links that exist (tombstones included: a visit
	// just before a delete is still a visit). Stored clicks mean the link
	// exists (neither links nor clicks are ever removed), which spares the
	// usual case a lookup.
	if !link.ValidCode(string(d.Code)) {
		return nil
	}
	stored := get(a.totalsCur, d.Code)
	if stored == nil && get(a.linkCur, d.Code) == nil {
		return nil
	}
	merged, err := a.merger.Merge(stored)
	if err != nil {
		return corrupt("stored clicks of %q: %w", d.Code, err)
	}
	// bbolt keeps keys and values until the commit: both are copies.
	if err := a.totals.Put(bytes.Clone(d.Code), bytes.Clone(merged)); err != nil {
		return fmt.Errorf("put clicks: %w", err)
	}
	if before, after := a.merger.HumanTotals(); before != after {
		// The link's click index entries move (a tombstone has none).
		v := get(a.linkCur, d.Code)
		rv, err := command.ViewRecord(v)
		if err != nil {
			return corrupt("stored link %q: %w", d.Code, err)
		}
		if v != nil && !rv.Deleted {
			// clicksKey copies owner and code into keys of its own.
			err := deleteClicks(a.tx, rv.Owner, rv.Created, d.Code, before)
			if err == nil {
				err = putClicks(a.tx, rv.Owner, rv.Created, d.Code, after)
			}
			if err != nil {
				return fmt.Errorf("click index of %q: %w", d.Code, err)
			}
		}
	}
	return d.Hours(func(h command.HourCount) error {
		k := hourKey(string(d.Code), h.Hour)
		cur := command.HourCount{Hour: h.Hour}
		if v := get(a.hoursCur, k); v != nil {
			if err := cur.Unmarshal(v); err != nil {
				return corrupt("stored hour of %q: %w", d.Code, err)
			}
		}
		cur.Hour, cur.Humans, cur.Bots = h.Hour, cur.Humans+h.Humans, cur.Bots+h.Bots
		if err := a.hours.Put(k, cur.AppendTo(nil)); err != nil {
			return fmt.Errorf("put click hour: %w", err)
		}
		return nil
	})
}
