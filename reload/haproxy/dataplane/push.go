package dataplane

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// push sends want to the host, which has what has describes (nil: unknown). Without reload
// (restoring), nothing is validated and the API does not reload. modified reports whether
// the host's files may have changed (certificates replaced, configuration stored), whatever
// the error.
func (r *Reloader) push(ctx context.Context, h *host, want, has *payload, doReload bool) (modified bool, err error) {
	c := h.c
	if _, err := c.apiVersion(ctx); err != nil {
		return false, err
	}
	version, err := c.Version(ctx)
	if err != nil {
		return false, err
	}
	all, err := listStorages(ctx, c, want, has)
	if err != nil {
		return false, err
	}
	// New files first: no configuration uses them yet, so this is harmless even if the
	// configuration is refused below (they are removed again then).
	if err := r.uploadNew(ctx, h, all, want, has); err != nil {
		return all.anyAdded(), err
	}
	if doReload {
		// A configuration rendered for the directory templates used before the host said
		// where it stores certificates would be refused (its files are elsewhere): stop,
		// once, and let the new rendering come. The certificates uploaded stay: it needs them.
		if err := r.staleDir(h, want); err != nil {
			return all.anyAdded(), err
		}
		if err := c.Validate(ctx, want.files.Config); err != nil {
			r.removeAdded(ctx, c, all)
			return false, err
		}
	}
	if err := replaceChanged(ctx, c, all, want); err != nil {
		return true, err
	}
	reloadID, version, err := r.pushConfig(ctx, c, want.files.Config, version, doReload)
	if err != nil {
		var rej *Rejection
		if errors.As(err, &rej) {
			r.removeAdded(ctx, c, all)
		}
		return all.anyChanged(), err
	}
	if doReload && reloadID != "" {
		if err := r.waitReload(ctx, c, reloadID, want.files.Config); err != nil {
			var rej *Rejection
			if errors.As(err, &rej) {
				rej.reloaded = true
			}
			return true, err
		}
	}
	r.deleteUnwanted(ctx, c, all, want)
	r.log.Debug("pushed", append([]any{"endpoint", c.label, "content_hash", short(want.hash), "version", version + 1, "reload_id", reloadID,
		"reload", doReload}, all.counts()...)...)
	return true, nil
}

// storageFiles is one storage as a push sees it: what it holds, and what the push adds
// (uploaded before the configuration is validated) and changes (replaced once it is valid).
type storageFiles struct {
	st             storage
	stored         []storedFile
	added, changed []string // storage names
}

// pushFiles are the storages of one push, certificates first.
type pushFiles []*storageFiles

func (all pushFiles) anyAdded() bool {
	for _, f := range all {
		if len(f.added) > 0 {
			return true
		}
	}
	return false
}

func (all pushFiles) anyChanged() bool {
	for _, f := range all {
		if len(f.changed) > 0 {
			return true
		}
	}
	return false
}

// counts are the files added and replaced per storage, as log attributes.
func (all pushFiles) counts() []any {
	var counts []any
	for _, f := range all {
		key := strings.ReplaceAll(f.st.kind, " ", "_")
		counts = append(counts, key+"s_added", len(f.added), key+"s_replaced", len(f.changed))
	}
	return counts
}

// listStorages lists what the host's storages hold. A map or general storage is not listed
// when neither want nor has has files for it, nor when the API has no such storage and want
// has nothing for it.
func listStorages(ctx context.Context, c *client, want, has *payload) (pushFiles, error) {
	var all pushFiles
	for _, st := range []storage{certStorage, mapStorage, generalStorage} {
		f := &storageFiles{st: st}
		if st != certStorage && len(want.in(st)) == 0 && has != nil && len(has.in(st)) == 0 {
			all = append(all, f) // nothing there, nothing wanted: not even listed
			continue
		}
		list, err := c.List(ctx, st)
		if err != nil {
			var ae *APIError
			if st != certStorage && len(want.in(st)) == 0 && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				all = append(all, f) // an API without this storage, and nothing for it
				continue
			}
			return nil, err
		}
		f.stored = list
		all = append(all, f)
	}
	return all, nil
}

// uploadNew uploads the files of want the storages do not hold (added), and notes those they
// hold that differ from what the host has (changed, replaced once the configuration is valid).
// Each stored file tells where the host keeps its storage.
func (r *Reloader) uploadNew(ctx context.Context, h *host, all pushFiles, want, has *payload) error {
	for _, f := range all {
		present := map[string]bool{}
		for _, sf := range f.stored {
			present[sf.StorageName] = true
			r.learnStorageDir(h, f.st, sf.File)
		}
		for _, name := range sortedNames(want.in(f.st)) {
			file := name + f.st.ext
			switch {
			case !present[file]:
				sf, err := h.c.Upload(ctx, f.st, file, want.in(f.st)[name])
				if err != nil {
					return err
				}
				r.learnStorageDir(h, f.st, sf.File)
				f.added = append(f.added, file)
			case has == nil || string(has.in(f.st)[name]) != string(want.in(f.st)[name]):
				f.changed = append(f.changed, file)
			}
		}
	}
	return nil
}

// removeAdded deletes the files uploaded for a configuration the host refused, even when ctx
// has ended.
func (r *Reloader) removeAdded(ctx context.Context, c *client, all pushFiles) {
	for _, f := range all {
		for _, file := range f.added {
			if err := c.Delete(context.WithoutCancel(ctx), f.st, file); err != nil {
				r.log.Warn("remove a "+f.st.kind+" uploaded for a refused configuration", "endpoint", c.label, "error", err)
			}
		}
	}
}

// replaceChanged replaces the stored files whose content changed.
func replaceChanged(ctx context.Context, c *client, all pushFiles, want *payload) error {
	for _, f := range all {
		for _, file := range f.changed {
			name, _ := f.st.name(file)
			if err := c.Replace(ctx, f.st, file, want.in(f.st)[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// pushConfig stores config at version; when someone else moved the version meanwhile (409),
// it reads it again and retries, up to MaxConflicts times. It returns the Reload-Id to follow
// and the version the configuration was stored over.
func (r *Reloader) pushConfig(ctx context.Context, c *client, config []byte, version int64, doReload bool) (reloadID string, at int64, err error) {
	for attempt := 0; ; attempt++ {
		reloadID, err = c.PushConfig(ctx, config, version, doReload)
		if !errors.Is(err, errConflict) || attempt >= r.cfg.MaxConflicts {
			return reloadID, version, err
		}
		r.log.Debug("configuration version moved under us; retrying", "endpoint", c.label, "version", version, "attempt", attempt+1)
		if version, err = c.Version(ctx); err != nil {
			return "", version, err
		}
	}
}

// deleteUnwanted deletes the stored files the configuration no longer has, once the
// configuration that stopped using them is live (the API refuses to delete a map or general
// file the stored configuration names). The sidecar owns the storage directories.
func (r *Reloader) deleteUnwanted(ctx context.Context, c *client, all pushFiles, want *payload) {
	for _, f := range all {
		for _, sf := range f.stored {
			if name, ok := f.st.name(sf.StorageName); ok {
				if _, wanted := want.in(f.st)[name]; wanted {
					continue
				}
			}
			if err := c.Delete(ctx, f.st, sf.StorageName); err != nil {
				r.log.Warn("delete a "+f.st.kind+" the configuration no longer has", "endpoint", c.label, "file", sf.StorageName, "error", err)
			}
		}
	}
}
