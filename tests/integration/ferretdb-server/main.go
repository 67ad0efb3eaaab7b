// ferretdb-server: stele's MongoDB-compatible test server. It embeds FerretDB v1.24.2 with
// its SQLite backend (github.com/FerretDB/FerretDB/ferretdb), because the upstream
// `cmd/ferretdb` binary refuses to start when built with `go install` (its version file is
// missing from the module). The embedded package disables telemetry itself; this program
// only ever listens on a loopback address and never dials out.
//
// Usage: ferretdb-server -listen 127.0.0.1:PORT -data DIR [-log-level warn]
// It runs until SIGTERM or SIGINT; its data in DIR survives restarts.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "loopback address to listen on")
	dataDir := flag.String("data", "", "directory for the SQLite databases (required)")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	flag.Parse()

	if err := run(*listen, *dataDir, *logLevel); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb-server: %s\n", err)
		os.Exit(1)
	}
}

func run(listen, dataDir, logLevel string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("bad -listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen must be a loopback IP address, got %q", host)
	}
	if dataDir == "" {
		return fmt.Errorf("-data is required")
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("bad -log-level %q", logLevel)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return f.Run(ctx)
}
