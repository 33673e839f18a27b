package raftgroup

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's hclog output to a slog.Logger, so every
// Raft group logs structured lines tagged with its group.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *slog.LevelVar
}

// NewHCLogger returns an hclog.Logger writing to l.
func NewHCLogger(l *slog.Logger, name string) hclog.Logger {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelDebug - 4)
	return &hclogAdapter{l: l, name: name, level: lv}
}

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// routine are raft's messages of a healthy election (every group logs
// them as it starts): they go out at DEBUG, so that a node's start says a
// handful of things at INFO. An election after a leader was lost stays a
// warning (see levelOf).
var routine = map[string]bool{
	"initial configuration":                  true,
	"entering follower state":                true,
	"entering candidate state":               true,
	"pre-vote successful, starting election": true,
	"election won":                           true,
	"entering leader state":                  true,
}

// levelOf is the slog level of one of raft's messages.
func levelOf(hl hclog.Level, msg string, args []any) slog.Level {
	if routine[msg] {
		return slog.LevelDebug
	}
	if msg == "heartbeat timeout reached, starting election" {
		// At start no leader was ever known: nothing is wrong.
		for i := 0; i+1 < len(args); i += 2 {
			if args[i] == "last-leader-id" && fmt.Sprint(args[i+1]) == "" {
				return slog.LevelDebug
			}
		}
	}
	return toSlog(hl)
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	sl := levelOf(level, msg, args)
	if sl < h.level.Level() || !h.l.Enabled(context.Background(), sl) {
		return
	}
	all := make([]any, 0, len(h.args)+len(args)+2)
	if h.name != "" {
		all = append(all, "component", h.name)
	}
	all = append(all, h.args...)
	for _, a := range args {
		// raft formats some values lazily with hclog.Fmt.
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				a = fmt.Sprintf(format, f[1:]...)
			}
		}
		all = append(all, a)
	}
	h.l.Log(context.Background(), sl, msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(level hclog.Level) bool {
	sl := toSlog(level)
	return sl >= h.level.Level() && h.l.Enabled(context.Background(), sl)
}

func (h *hclogAdapter) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogAdapter) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogAdapter) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.args }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogAdapter) SetLevel(level hclog.Level) { h.level.Set(toSlog(level)) }

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch l := h.level.Level(); {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo).Writer()
}
