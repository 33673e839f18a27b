package raftgroup

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// ErrInUse is returned by Recover when a running node holds the group's
// files.
var ErrInUse = errors.New("the group's files are in use: stop the node first")

// ErrNoSurvivor is returned by Recover when none of the servers to keep is
// in the group's configuration.
var ErrNoSurvivor = errors.New("none of the servers to keep is in the group")

// Recover rewrites the configuration of the stopped group in cfg.Dir to
// the servers of its latest configuration whose IDs are in keep, every one
// a voter: the way back after a majority of the group is lost for good
// (hashicorp/raft's RecoverCluster, as Consul's peers.json and etcd's
// --force-new-cluster). Every entry of the log, committed or not, is
// applied to cfg.FSM; then a snapshot carrying the new configuration
// replaces the log. Each survivor runs it on its own copy, with the same
// keep, while every node of the group is stopped. It returns the servers
// of the new configuration.
//
// Writes that only the lost servers had are gone, and an entry this
// replica held but never saw committed is applied: the group goes on from
// what this replica had.
//
// Like Open, Recover closes cfg.Log (a view of the node's shared log) when
// it is done; LatestServers leaves it open.
func Recover(cfg Config, keep []string) ([]Server, error) {
	if cfg.FSM == nil || cfg.NodeID == "" || cfg.Dir == "" {
		return nil, errors.New("raftgroup: Recover needs FSM, NodeID and Dir")
	}
	hl := NewHCLogger(logger(cfg), "raft")
	rc, err := raftConfig(cfg, DefaultTiming, hl)
	if err != nil {
		return nil, err
	}
	logStore, cached, snaps, err := openStores(cfg, hl)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", cfg.Dir, ErrInUse)
	}
	if err != nil {
		return nil, err
	}
	defer logStore.Close()
	_, trans := raft.NewInmemTransport("")
	current, err := raft.GetConfiguration(rc, cfg.FSM, cached, logStore, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("%s: read its configuration: %w", cfg.Dir, err)
	}
	var next raft.Configuration
	var kept []Server
	for _, s := range current.Servers {
		if slices.Contains(keep, string(s.ID)) {
			s.Suffrage = raft.Voter
			next.Servers = append(next.Servers, s)
			kept = append(kept, Server{ID: string(s.ID), Address: string(s.Address)})
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s: %w (it has %v)", cfg.Dir, ErrNoSurvivor, current.Servers)
	}
	if err := raft.RecoverCluster(rc, cfg.FSM, cached, logStore, snaps, trans, next); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Dir, err)
	}
	return kept, nil
}

// LatestServers returns the servers of the latest configuration that the
// stopped group in dir holds (its log's last configuration entry, else its
// snapshot's), without starting it. log is the group's view of the node's
// shared log (left open), or nil for a group with its own raft.db in dir.
func LatestServers(dir string, log *nodelog.Log) ([]Server, error) {
	store, err := openLog(Config{Dir: dir, Log: log}, time.Second)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", dir, ErrInUse)
	}
	if err != nil {
		return nil, err
	}
	if log == nil { // the caller's view stays open for the caller
		defer store.Close()
	}
	first, err := store.FirstIndex()
	if err != nil {
		return nil, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, err
	}
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			break
		}
		if l.Type == raft.LogConfiguration {
			return servers(raft.DecodeConfiguration(l.Data)), nil
		}
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, hclog.NewNullLogger())
	if err != nil {
		return nil, err
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return servers(list[0].Configuration), nil
}

// servers is c as Servers.
func servers(c raft.Configuration) []Server {
	out := make([]Server, 0, len(c.Servers))
	for _, s := range c.Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Nonvoter: s.Suffrage != raft.Voter})
	}
	return out
}
