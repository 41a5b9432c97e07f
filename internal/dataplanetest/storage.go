package dataplanetest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The map and general file storages, as the real API (client-native's storage package behind
// dataplaneapi's storage handlers) has them, under /services/haproxy/storage/maps and
// /services/haproxy/storage/general:
//
//	GET    /storage/{maps,general}          list: [{storage_name, file, description, id}], every file of the directory
//	POST   /storage/{maps,general}          multipart field file_upload: 201 and the stored file's model (size too);
//	                                        409 when it exists; no reload (the configuration did not change)
//	GET    /storage/{maps,general}/{name}   the raw contents, application/octet-stream; 404
//	PUT    /storage/maps/{name}             text/plain body; general: a multipart file_upload on v3 (v3.0.6 on),
//	                                        text/plain on v2 (415 for the other); 404 when missing; 202 and a
//	                                        Reload-Id, or 204 with skip_reload or force_reload
//	DELETE /storage/{maps,general}/{name}   204; 404 when missing; 409 while the stored configuration names the
//	                                        file on a line that is not a comment
//
// Names are sanitized as the real storage does it (sanitizeFilename): only letters, digits,
// '_', '-' and '\' are kept in the name and in its last extension, anything else becomes '_';
// a map file's name gets ".map" when it has another extension or none.

// File is the API's model of a map file or a general use file.
type File struct {
	StorageName string `json:"storage_name"`
	File        string `json:"file"`
	Description string `json:"description,omitempty"`
	ID          string `json:"id"`
	Size        *int64 `json:"size,omitempty"`
}

// fileStorage is one of the two storages.
type fileStorage struct {
	dir                  string
	maps                 bool   // the map storage (names end in .map)
	listDesc, createDesc string // the descriptions the real API gives
}

func (s *Server) mapStorage() *fileStorage {
	return &fileStorage{dir: s.MapsDir, maps: true, listDesc: "managed map file", createDesc: "managed but not loaded map file (no runtime ID)"}
}

func (s *Server) generalStorage() *fileStorage {
	return &fileStorage{dir: s.GeneralDir, listDesc: "managed general use file", createDesc: "managed general use file"}
}

// storageRoutes registers the map and general storages on mux under p.
func (s *Server) storageRoutes(mux *http.ServeMux, p string) {
	for path, st := range map[string]*fileStorage{p + "/storage/maps": s.mapStorage(), p + "/storage/general": s.generalStorage()} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { s.listFiles(w, st) })
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) { s.createFile(w, r, st) })
		mux.HandleFunc("GET "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.getFile(w, r, st) })
		mux.HandleFunc("PUT "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.replaceFile(w, r, st) })
		mux.HandleFunc("DELETE "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.deleteFile(w, r, st) })
	}
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_\\-]+`)

// sanitizeFilename is client-native's misc.SanitizeFilename: the last extension is kept, the
// rest collapsed as a path, and what is not a letter, a digit, '_', '-' or '\' becomes '_'.
func sanitizeFilename(name string) string {
	ext := filepath.Ext(name)
	name = name[:len(name)-len(ext)]
	if name != "" {
		name = filepath.Clean(name)
	}
	name = unsafeName.ReplaceAllString(name, "_")
	if ext != "" {
		ext = unsafeName.ReplaceAllString(ext[1:], "_")
		if name != "" {
			return name + "." + ext
		}
		return "_" + ext
	}
	return name
}

// path is the file a storage name names ("" with the reason when it cannot be one).
func (st *fileStorage) path(name string) (string, error) {
	name = sanitizeFilename(name)
	if name == "" {
		return "", errors.New("no file name")
	}
	return filepath.Join(st.dir, name), nil
}

func (s *Server) listFiles(w http.ResponseWriter, st *fileStorage) {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	list := []File{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") { // the stand-in's own temporary files
			continue
		}
		list = append(list, File{StorageName: e.Name(), File: filepath.Join(st.dir, e.Name()), Description: st.listDesc})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].StorageName < list[j].StorageName })
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) createFile(w http.ResponseWriter, r *http.Request, st *fileStorage) {
	file, hdr, err := r.FormFile("file_upload")
	if err != nil {
		writeError(w, http.StatusBadRequest, "file_upload: "+err.Error())
		return
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		writeError(w, http.StatusBadRequest, "file_upload: "+err.Error())
		return
	}
	name := sanitizeFilename(hdr.Filename)
	if st.maps && !strings.HasSuffix(name, ".map") {
		name += ".map"
	}
	path := filepath.Join(st.dir, name)
	if _, err := os.Stat(path); err == nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("file %s already exists", path))
		return
	}
	if err := writeAtomic(path, data, 0o644); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	size := int64(len(data))
	// No reload: the configuration did not change.
	writeJSON(w, http.StatusCreated, File{StorageName: name, File: path, Description: st.createDesc, Size: &size})
}

// existing returns the file a request names, or answers 400/404.
func existing(w http.ResponseWriter, r *http.Request, st *fileStorage) (string, bool) {
	path, err := st.path(r.PathValue("name"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	if _, err := os.Stat(path); err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("file %s doesn't exist in dir: %s", sanitizeFilename(r.PathValue("name")), st.dir))
		return "", false
	}
	return path, true
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, st *fileStorage) {
	path, ok := existing(w, r, st)
	if !ok {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// replaceBody reads what a PUT sends in the form its storage and version take: text/plain, or
// for general files from v3 on (unless the stand-in plays an earlier v3.0) a multipart form
// with field file_upload. Another content type answers 415, as the real API's consumes list
// does.
func (s *Server) replaceBody(w http.ResponseWriter, r *http.Request, st *fileStorage) ([]byte, bool) {
	wantForm := !st.maps && s.opts.APIVersion >= 3 && !s.opts.GeneralReplaceText
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case wantForm && mt == "multipart/form-data":
		file, _, err := r.FormFile("file_upload")
		if err != nil {
			writeError(w, http.StatusBadRequest, "file_upload: "+err.Error())
			return nil, false
		}
		defer file.Close()
		b, err := io.ReadAll(file)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return nil, false
		}
		return b, true
	case !wantForm && mt == "text/plain":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return nil, false
		}
		return b, true
	}
	writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported media type %q", r.Header.Get("Content-Type")))
	return nil, false
}

func (s *Server) replaceFile(w http.ResponseWriter, r *http.Request, st *fileStorage) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	data, ok := s.replaceBody(w, r, st)
	if !ok {
		return
	}
	path, ok := existing(w, r, st)
	if !ok {
		return
	}
	if err := writeAtomic(path, data, 0o644); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.afterWrite(w, p, http.StatusNoContent, "", nil)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, st *fileStorage) {
	path, ok := existing(w, r, st)
	if !ok {
		return
	}
	// As the real API: "far from perfect but should provide a basic level of protection".
	text, _, err := s.stored()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 16<<20)
	for n := 0; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, path) && !strings.HasPrefix(line, "#") {
			writeError(w, http.StatusConflict, fmt.Sprintf("rejecting attempt to delete file %s referenced in haproxy conf at line %d: %s", path, n-1, line))
			return
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// MapFiles lists the names of the files in the map storage directory.
func (s *Server) MapFiles(t testing.TB) []string { return dirNames(t, s.MapsDir) }

// GeneralFiles lists the names of the files in the general storage directory.
func (s *Server) GeneralFiles(t testing.TB) []string { return dirNames(t, s.GeneralDir) }

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}
