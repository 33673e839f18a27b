//go:build !jepsenbugs

package cluster

import (
	"context"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/shard"
)

// The cluster's hooks for the chaos harness's deliberate faults
// (faults_on.go, in jepsenbugs builds only, has what they do): in this
// build they do nothing and compile away.

func (*Node) faultEarlyAck(context.Context, command.GroupID, []byte, *command.CreateIfAbsent) (*link.Link, error, bool) {
	return nil, nil, false
}

func faultLoseAnswer(error, *command.CreateIfAbsent) bool { return false }

func (*Node) faultSubmitClicks(context.Context, command.ShardID, *command.ClickBatch) (error, bool) {
	return nil, false
}

func faultStaleConsistent(*shard.Shard, string) (*link.Link, error, bool) { return nil, nil, false }

func faultFollowerRead() bool { return false }

func faultNoLease(uint64) (uint64, uint64, bool) { return 0, 0, false }

func faultNoInvalidate() bool { return false }

func (*Node) faultBeforeShardOpen(string, command.ShardID, bool) {}
