package fsm

import (
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// BatchResult answers a CreateBatch: Results[i] belongs to Creates[i].
type BatchResult struct {
	Results []Result
}

// applyCreateBatch applies each create of the batch as applyCreate would
// alone, inside the batch's one transaction.
func (f *ShardFSM) applyCreateBatch(tx *bolt.Tx, c *command.CreateBatch, index uint64) any {
	out := &BatchResult{Results: make([]Result, len(c.Creates))}
	for i := range c.Creates {
		out.Results[i] = *f.applyCreate(tx, &c.Creates[i], index).(*Result)
	}
	return out
}
