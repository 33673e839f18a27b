package fsm

import (
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// applyCreateBatch applies each create of the batch as applyCreate would
// alone, inside the batch's one transaction.
func (f *ShardFSM) applyCreateBatch(tx *bolt.Tx, c *command.CreateBatch, index uint64) (any, error) {
	out := &command.BatchResult{Results: make([]command.LinkResult, len(c.Creates))}
	for i := range c.Creates {
		r, err := f.applyCreate(tx, &c.Creates[i], index)
		if err != nil {
			return nil, err
		}
		out.Results[i] = *r.(*command.LinkResult)
	}
	return out, nil
}
