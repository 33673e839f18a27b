package fsm

import (
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// Click state lives in three buckets of the shard file.
var (
	bucketClicks     = []byte("clicks")      // code -> command.ClickTotals
	bucketClickHours = []byte("click-hours") // code 0x00 hour(8, BE) -> command.HourCount
	bucketClickSeq   = []byte("click-seq")   // node -> highest applied seq (8, BE)
)

func hourKey(code string, hour uint64) []byte {
	k := make([]byte, 0, len(code)+9)
	k = append(k, code...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, hour)
}

// Clicks reads code's click state from this replica (it may lag the
// leader by the replication delay). Unknown codes have zero counts.
func (f *ShardFSM) Clicks(code string, from, to time.Time) (*command.ClickStats, error) {
	st := &command.ClickStats{}
	err := f.view(func(tx *bolt.Tx) error {
		return readClicks(tx, code, uint64(max(from.Unix(), 0))/3600, uint64(max(to.Unix(), 0)+3599)/3600, st)
	})
	return st, err
}

// readClicks reads code's totals and its hours in [lo, hi) into st.
func readClicks(tx *bolt.Tx, code string, lo, hi uint64, st *command.ClickStats) error {
	if v := tx.Bucket(bucketClicks).Get([]byte(code)); v != nil {
		if err := st.Totals.Unmarshal(v); err != nil {
			return err
		}
	}
	c := tx.Bucket(bucketClickHours).Cursor()
	prefix := append([]byte(code), 0)
	for k, v := c.Seek(hourKey(code, lo)); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		var h command.HourCount
		if err := h.Unmarshal(v); err != nil {
			return err
		}
		if h.Hour >= hi {
			break
		}
		st.Hours = append(st.Hours, h)
	}
	return nil
}
