package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// maxBatchBytes is how much one CreateBatch entry may hold: with the RPC's
// base64 and the answer's links (each about its create's size) it stays
// far below the 1 MiB RPC frame.
const maxBatchBytes = 256 << 10

// CreateMany stores many links at once. Each request succeeds or fails on
// its own, exactly as Create would answer it; the difference is the cost:
// the creates are grouped by shard and each group is proposed as one
// command.CreateBatch entry (up to command.MaxCreateBatch creates), so a thousand
// links cost each shard one Raft commit instead of a thousand. Shards are
// written in parallel. Results are in request order.
//
// A batch whose outcome is unknown (the leader failed, a forwarded call timed
// out) is retried whole with the same codes and nonces until ctx ends, as
// Create retries: creates that took effect answer with their link, the
// others are made. Without a deadline on ctx, CreateMany allows 30 s.
func (ls *Links) CreateMany(ctx context.Context, reqs []link.CreateRequest) []link.CreateResult {
	n := ls.n
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	out := make([]link.CreateResult, len(reqs))
	cmds := make([]command.CreateIfAbsent, len(reqs))
	generated := make([]bool, len(reqs))
	now := time.Now().UTC()
	need := 0
	gates := map[int]error{} // supports, once per level
	for i, req := range reqs {
		cmds[i] = newCreate(req, now)
		lv := cmds[i].Level()
		err, ok := gates[lv]
		if !ok {
			err = n.supports(lv)
			gates[lv] = err
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		if cmds[i].Code == "" {
			generated[i] = true
			need++
		}
	}
	// The generated codes come from one lease of their own, not from the
	// node's allocator: a thousand Next calls per request, from many
	// requests at once, would queue behind its 1,024-ID leases.
	codes, err := ls.leaseCodes(ctx, need)
	for i := range reqs {
		if generated[i] && out[i].Err == nil {
			if err != nil {
				out[i].Err = err
				continue
			}
			cmds[i].Code, codes = codes[0], codes[1:]
		}
	}
	ls.proposeCreates(ctx, cmds, out)
	// A generated code that an alias took first: that ID's code is someone's
	// alias. Rare (aliases that look like generated codes), so done alone.
	for i := range out {
		if generated[i] && errors.Is(out[i].Err, link.ErrAliasTaken) {
			out[i].Link, out[i].Err = ls.Create(ctx, reqs[i])
		}
	}
	return out
}

// proposeCreates proposes every create of cmds whose out[i] has no error
// yet, grouped by shard into CreateBatch entries, the shards in parallel,
// and sets out[i] to each one's answer.
func (ls *Links) proposeCreates(ctx context.Context, cmds []command.CreateIfAbsent, out []link.CreateResult) {
	byShard := map[command.ShardID][]int{}
	for i := range cmds {
		if out[i].Err == nil {
			s := ls.n.host.locate(cmds[i].Code)
			byShard[s] = append(byShard[s], i)
		}
	}
	var wg sync.WaitGroup
	for s, idx := range byShard {
		for len(idx) > 0 {
			// Up to command.MaxCreateBatch creates and maxBatchBytes of
			// encoded creates (URL, tags, owner and all), so that the
			// entry and a forwarded call's answer stay well inside the
			// RPC frame.
			end, size := 0, 0
			for end < len(idx) && end < command.MaxCreateBatch {
				next := cmds[idx[end]].EncodedSize()
				if end > 0 && size+next > maxBatchBytes {
					break
				}
				size += next
				end++
			}
			chunk := idx[:end]
			idx = idx[end:]
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := &command.CreateBatch{Creates: make([]command.CreateIfAbsent, len(chunk))}
				for j, i := range chunk {
					batch.Creates[j] = cmds[i]
				}
				results, err := ls.applyCreateBatch(ctx, s.Group(), batch)
				for j, i := range chunk {
					if err != nil {
						out[i].Err = err
					} else {
						out[i] = link.CreateResult{Link: results[j].Link, Err: results[j].Err}
					}
				}
			}()
		}
	}
	wg.Wait()
}

// applyCreateBatch proposes batch on group's leader, retrying an unknown
// outcome with the same entry until ctx ends (see applyCreate).
func (ls *Links) applyCreateBatch(ctx context.Context, group command.GroupID, batch *command.CreateBatch) ([]command.LinkResult, error) {
	r, err := ls.n.router.retryUnknown(ctx, group, batch.Encode())
	if err != nil {
		return nil, err
	}
	if len(r.Batch) != len(batch.Creates) {
		return nil, fmt.Errorf("create batch of %d answered with %d results", len(batch.Creates), len(r.Batch))
	}
	return r.Batch, nil
}

// leaseCodes leases count fresh IDs through the meta group (one lease unless
// count is huge or reserved words need replacing) and returns their codes.
func (ls *Links) leaseCodes(ctx context.Context, count int) ([]string, error) {
	n := ls.n
	codes := make([]string, 0, count)
	for len(codes) < count {
		start, end, err := n.leaseRange(ctx, uint64(min(count-len(codes), command.MaxLease)))
		if err != nil {
			return nil, fmt.Errorf("%w: lease ids: %w", link.ErrUnavailable, err)
		}
		for id := start; id < end && len(codes) < count; id++ {
			code, err := n.host.coder.Code(id)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", link.ErrExhausted, err)
			}
			if !link.IsReserved(code) {
				codes = append(codes, code)
			}
		}
	}
	return codes, nil
}
