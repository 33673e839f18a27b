package peer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/linkraft/linkraft/internal/wire"
)

// MaxFrame bounds one frame's body, either way.
const MaxFrame = 1 << 20

// envelope is a request on the wire: the operation, the caller's time
// budget (ms; the server allows at most maxBudget) and the request
// message.
type envelope struct {
	Op       OpID
	BudgetMS uint64
	Body     []byte
}

var envelopeCodec = wire.NewCodec(nil,
	wire.Uint(1, func(e *envelope) *OpID { return &e.Op }),
	wire.Uint(2, func(e *envelope) *uint64 { return &e.BudgetMS }),
	wire.Bytes(3, func(e *envelope) *[]byte { return &e.Body }),
)

// reply is a response on the wire: an error (code and detail, errors.go),
// or the response message.
type reply struct {
	Code   uint32
	Detail string
	Body   []byte
}

var replyCodec = wire.NewCodec(nil,
	wire.Uint(1, func(r *reply) *uint32 { return &r.Code }),
	wire.String(2, func(r *reply) *string { return &r.Detail }),
	wire.Bytes(3, func(r *reply) *[]byte { return &r.Body }),
)

// writeFrame writes body as one frame and flushes it.
func writeFrame(w *bufio.Writer, body []byte) error {
	if len(body) > MaxFrame {
		return fmt.Errorf("peer: frame of %d bytes is over the limit", len(body))
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	return w.Flush()
}

// readFrame reads one frame's body. The buffer grows with the bytes that
// arrive, not with the length announced: a peer that announces a megabyte
// and sends nine bytes holds nine bytes of this node's memory.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("peer: frame of %d bytes is over the limit", n)
	}
	var buf bytes.Buffer
	if got, err := buf.ReadFrom(io.LimitReader(r, int64(n))); err != nil {
		return nil, err
	} else if got != int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	return buf.Bytes(), nil
}
