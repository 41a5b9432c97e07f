package config

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Log is the sidecar's log: level and format.
type Log struct {
	Level, Format string
}

func (*Log) title() string { return "Logs" }

func (l *Log) register(fs *flag.FlagSet) {
	choiceVar(fs, &l.Level, "log-level", "info", []string{"debug", "info", "warn", "error"}, "debug, info, warn or error")
	choiceVar(fs, &l.Format, "log-format", "text", []string{"text", "json"}, "text or json (json: durations in seconds)")
}

func (l *Log) validate() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if l.Format != "text" && l.Format != "json" {
		return fmt.Errorf("--log-format %q: want text or json", l.Format)
	}
	return nil
}

// Handler is the log handler the options ask for, writing to w; opts are the handler's
// other options (the level is the options').
func (l *Log) Handler(w io.Writer, opts slog.HandlerOptions) (slog.Handler, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(l.Level))
	opts.Level = lvl
	if l.Format == "json" {
		return slog.NewJSONHandler(w, &opts), nil
	}
	return slog.NewTextHandler(w, &opts), nil
}
