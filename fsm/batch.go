package fsm

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// MaxCreateBatch bounds the creates in one CreateBatch entry, so that an
// entry stays far below the RPC frame and raft's message sizes.
const MaxCreateBatch = 1024

// fBatchCreate is the field of each create in a CreateBatch.
const fBatchCreate = 1

// CreateBatch is many CreateIfAbsent in one Raft entry: a bulk import pays
// one commit (one fsync on each replica) per batch instead of per link. Each
// create succeeds or fails on its own, exactly as it would alone; the
// response is a *BatchResult with one Result per create, in order.
type CreateBatch struct {
	Creates []CreateIfAbsent
}

// BatchResult answers a CreateBatch: Results[i] belongs to Creates[i].
type BatchResult struct {
	Results []Result
}

var createBatchCodec = newCodec(func(c *CreateBatch) error {
	if len(c.Creates) == 0 {
		return fmt.Errorf("%w: create batch without creates", ErrDecode)
	}
	return nil
}, messagesField(fBatchCreate, createCodec, func(c *CreateBatch) *[]CreateIfAbsent { return &c.Creates }))

// Encode returns the Raft entry for c.
func (c *CreateBatch) Encode() []byte {
	size := 1
	for i := range c.Creates {
		size += 80 + len(c.Creates[i].URL)
	}
	return createBatchCodec.append(append(make([]byte, 0, size), byte(TypeCreateBatch)), c)
}

func decodeCreateBatch(body []byte) (*CreateBatch, error) { return createBatchCodec.decode(body) }

// applyCreateBatch applies each create of the batch as applyCreate would
// alone, inside the batch's one transaction.
func (f *ShardFSM) applyCreateBatch(tx *bolt.Tx, c *CreateBatch, index uint64) any {
	out := &BatchResult{Results: make([]Result, len(c.Creates))}
	for i := range c.Creates {
		out.Results[i] = *f.applyCreate(tx, &c.Creates[i], index).(*Result)
	}
	return out
}
