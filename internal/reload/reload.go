// Package reload applies a changed configuration file to a running daemon,
// on SIGHUP and whenever the file changes on disk, so that queue settings,
// new queues and API keys take effect without a restart and without losing
// jobs (config.md: "reloading (SIGHUP, or a file change)").
//
// A new file is validated in full before anything is applied: an invalid or
// unreadable file is rejected with one "reload rejected" log line and the
// running configuration stays. Reloads are serialised in Watcher.Run, so a
// signal and a file change arriving together cannot interleave.
package reload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
)

// DefaultDebounce is how long the watcher waits after the last file event
// before reading the file. Editors save in bursts (truncate, write, chmod;
// or write a temporary file and rename it over), and reading in the middle
// of a burst would see a half-written file.
const DefaultDebounce = 200 * time.Millisecond

// Target is what a reload is applied to; *daemon.Daemon implements it.
type Target interface {
	Reload(cfg *config.Config)
}

// Checker is a Target that can refuse a valid file for what the file
// cannot know: a queue it adds whose name a queue created over the API
// holds (runtime.md §1). A refusal is a "reload rejected" line naming it.
type Checker interface {
	CheckReload(cfg *config.Config) error
}

// Options configure a Watcher.
type Options struct {
	// Path is the configuration file. Empty means the daemon runs on built-in
	// defaults: there is nothing to watch, and Trigger reloads the defaults
	// (with the environment) as start-up did.
	Path string
	// Getenv resolves SIMPLEQ_* overrides and signingSecretEnv, as at
	// start-up; nil means os.Getenv.
	Getenv func(string) string
	// Target receives every valid new configuration.
	Target Target
	// Current is the configuration the daemon is running with; it is the
	// baseline for reporting what a reload changed.
	Current *config.Config
	// Logger receives one line per reload or rejection; nil discards them.
	Logger *zap.Logger
	// Debounce overrides DefaultDebounce (tests shorten it).
	Debounce time.Duration
}

// Watcher reloads the configuration on Trigger and on file changes. Create it
// with New and run it with Run.
type Watcher struct {
	opts    Options
	path    string // absolute, cleaned; "" without a file
	trigger chan string
	// current and last are touched only by Run's goroutine (and New).
	current *config.Config
	last    []byte // file contents behind current, to skip no-op events

	// Test signals, nil in production (one nil check each): afterEvent
	// learns of every file event Run looked at and whether it counted,
	// afterReload of every reload Run finished, with its trigger. Tests wait
	// on them instead of sleeping past the debounce.
	afterEvent  func(name string, relevant bool)
	afterReload func(trigger string)
}

// New prepares a watcher. It reads the file once, so that a later file event
// that leaves the contents as they were (an editor's touch, a swap file in
// the same directory) does not count as a reload.
func New(opts Options) *Watcher {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	w := &Watcher{opts: opts, trigger: make(chan string, 1), current: opts.Current}
	if opts.Path != "" {
		w.path = filepath.Clean(opts.Path)
		if abs, err := filepath.Abs(w.path); err == nil {
			w.path = abs
		}
		w.last, _ = os.ReadFile(w.path)
	}
	return w
}

// Trigger asks Run to reload now, whatever the file's contents; it is what
// SIGHUP does. It never blocks: triggers that arrive while one is pending
// are merged into it.
func (w *Watcher) Trigger() {
	select {
	case w.trigger <- "signal":
	default:
	}
}

// Run watches the file's directory (not the file: editors and config
// managers that write a new file and rename it over the old one would leave
// a file watch on the deleted inode) and reloads on Trigger, until ctx ends.
// A file watch that cannot be set up is logged and Run keeps serving
// Trigger, so SIGHUP still works; Run returns nil when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	log := w.opts.Logger
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w.path != "" {
		fw, err := w.watch()
		if err != nil {
			log.Warn("cannot watch the configuration file; reload it with SIGHUP", zap.String("path", w.path), zap.Error(err))
		} else {
			defer fw.Close()
			events, watchErrs = fw.Events, fw.Errors
			log.Debug("watching the configuration file for changes", zap.String("path", w.path))
		}
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case why := <-w.trigger:
			w.reload(why, true)
			if w.afterReload != nil {
				w.afterReload(why)
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			relevant := w.relevant(ev)
			if relevant {
				debounce.Reset(w.opts.Debounce)
			}
			if w.afterEvent != nil {
				w.afterEvent(ev.Name, relevant)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			log.Warn("configuration file watch error", zap.Error(err))
		case <-debounce.C:
			w.reload("file change", false)
			if w.afterReload != nil {
				w.afterReload("file change")
			}
		}
	}
}

func (w *Watcher) watch() (*fsnotify.Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("start file watcher: %w", err)
	}
	if err := fw.Add(filepath.Dir(w.path)); err != nil {
		_ = fw.Close()
		return nil, fmt.Errorf("watch %s: %w", filepath.Dir(w.path), err)
	}
	return fw, nil
}

// relevant reports whether a directory event may have changed the file. When
// the file is a symlink (a Kubernetes ConfigMap swaps a "..data" link under
// it), any event in the directory may have, and the contents comparison in
// reload filters out the rest.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if filepath.Clean(ev.Name) == w.path {
		return true
	}
	fi, err := os.Lstat(w.path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// errEmpty rejects an empty file: it would be a valid configuration (the
// built-in defaults, with no queues), but on a reload it is far more likely
// a save caught half-way than an operator removing every queue, which
// "queues: {}" still expresses.
var errEmpty = errors.New("the file is empty (write \"queues: {}\" to really remove every queue)")

// reload loads, validates and applies the file. force (a signal) reloads
// even when the contents are unchanged.
func (w *Watcher) reload(trigger string, force bool) {
	log := w.opts.Logger.With(zap.String("trigger", trigger))
	var data []byte
	if w.path != "" {
		var err error
		data, err = os.ReadFile(w.path)
		if err != nil {
			log.Error("reload rejected: keeping the running configuration", zap.String("path", w.path), zap.Error(err))
			return
		}
		if !force && bytes.Equal(data, w.last) {
			log.Debug("configuration file event without a change of contents")
			return
		}
		if len(bytes.TrimSpace(data)) == 0 {
			log.Error("reload rejected: keeping the running configuration", zap.String("path", w.path), zap.Error(errEmpty))
			w.last = data
			return
		}
	}
	next, err := config.Load(w.opts.Path, w.opts.Getenv)
	if err != nil {
		// Remember the contents so the same bad file is reported once, not
		// on every unrelated event; a fixed file differs and is loaded.
		w.last = data
		log.Error("reload rejected: keeping the running configuration", zap.String("path", w.path), zap.Error(err))
		return
	}
	if c, ok := w.opts.Target.(Checker); ok {
		if err := c.CheckReload(next); err != nil {
			w.last = data
			log.Error("reload rejected: keeping the running configuration", zap.String("path", w.path), zap.Error(err))
			return
		}
	}
	ch := Diff(w.current, next)
	if len(ch.NeedRestart) > 0 {
		log.Warn("reload: these settings take effect only after a restart; the running values stay",
			zap.Strings("keys", ch.NeedRestart))
	}
	w.opts.Target.Reload(next)
	w.current, w.last = next, data
	log.Info("configuration reloaded",
		zap.Int("queues", len(next.Queues)),
		zap.Strings("queuesAdded", ch.Added),
		zap.Strings("queuesRemoved", ch.Removed),
		zap.Strings("queuesChanged", ch.ChangedLines()),
		zap.Bool("apiKeysChanged", ch.APIKeys))
}
