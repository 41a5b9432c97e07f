package watcher

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	sigyaml "sigs.k8s.io/yaml"
)

// manifestDecoder turns manifest files into Objects, the way `kubectl apply -f` reads them:
// YAML with several documents, JSON (one or more objects), List kinds. Decoding is strict, as
// kubectl's default server-side field validation is: an unknown or duplicate field is an
// error, not silently dropped.
type manifestDecoder struct {
	decoder          runtime.Decoder
	defaultNamespace string
	logger           *slog.Logger

	objs snapshot.Objects
	seen map[objectKey]string // where each object was first defined
	errs []error
}

type objectKey struct{ kind, namespace, name string }

func newManifestDecoder(defaultNamespace string, logger *slog.Logger) *manifestDecoder {
	if defaultNamespace == "" {
		defaultNamespace = corev1.NamespaceDefault
	}
	return &manifestDecoder{
		decoder:          serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer(),
		defaultNamespace: defaultNamespace,
		logger:           logger,
		seen:             map[objectKey]string{},
	}
}

func (d *manifestDecoder) fail(rel string, line, col int, err error) {
	d.errs = append(d.errs, &snapshot.InputError{
		Stage: snapshot.StageDecode,
		Ref:   snapshot.Ref{Kind: "File", Name: rel},
		Line:  line,
		Col:   col,
		Err:   err,
	})
}

// file decodes one file; rel is its path relative to the directory, for errors and logs.
func (d *manifestDecoder) file(rel string, data []byte) {
	if strings.HasSuffix(rel, ".json") {
		d.jsonFile(rel, data)
		return
	}
	d.yamlFile(rel, data)
}

// yamlLine finds the line in the messages of the YAML parser ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`line (\d+): `)

func (d *manifestDecoder) yamlFile(rel string, data []byte) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	cursor := 0
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			// Only a bad "---" line makes the reader fail.
			d.fail(rel, badSeparatorLine(data, cursor), 0, fmt.Errorf("invalid YAML: %v", err))
			return
		}
		// The reader returns the lines of each document verbatim: find where it starts.
		start := cursor
		if i := bytes.Index(data[cursor:], doc); i >= 0 {
			start = cursor + i
			cursor = start + len(doc)
		}
		line := lineAt(data, start)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		j, err := sigyaml.YAMLToJSONStrict(doc)
		if err != nil {
			msg := err.Error()
			msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
			msg = strings.TrimPrefix(msg, "yaml: ")
			errLine := 0
			if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
				n, _ := strconv.Atoi(msg[m[2]:m[3]])
				errLine = line + n - 1
				if m[0] == 0 {
					msg = msg[m[1]:]
				}
			}
			if errLine == 0 {
				errLine = line
			}
			d.fail(rel, errLine, 0, fmt.Errorf("invalid YAML: %s", msg))
			continue
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // only comments
		}
		d.document(rel, line, j, nil)
	}
}

func (d *manifestDecoder) jsonFile(rel string, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		if err != nil {
			var syn *json.SyntaxError
			if errors.As(err, &syn) {
				line, col := position(data, syn.Offset)
				d.fail(rel, line, col, fmt.Errorf("invalid JSON: %v", syn))
			} else if errors.Is(err, io.ErrUnexpectedEOF) {
				line, col := position(data, int64(len(data)))
				d.fail(rel, line, col, errors.New("invalid JSON: unexpected end of input"))
			} else {
				d.fail(rel, lineAt(data, int(start)), 0, fmt.Errorf("invalid JSON: %v", err))
			}
			return
		}
		offset := int(start)
		for offset < len(data) && isSpace(data[offset]) {
			offset++
		}
		d.document(rel, lineAt(data, offset), raw, nil)
	}
}

// document decodes one object (JSON); line is where it starts in the file. defaults gives the
// kind of the items of a typed list (a ConfigMapList's items carry no kind).
func (d *manifestDecoder) document(rel string, line int, j []byte, defaults *schema.GroupVersionKind) {
	trimmed := bytes.TrimSpace(j)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		d.fail(rel, line, 0, fmt.Errorf("the document is not an object: want a Kubernetes object with apiVersion and kind"))
		return
	}
	var head struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Items      json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &head); err != nil {
		d.fail(rel, line, 0, fmt.Errorf("reading apiVersion and kind: %v", err))
		return
	}
	if defaults != nil {
		if head.APIVersion == "" {
			head.APIVersion = defaults.GroupVersion().String()
		}
		if head.Kind == "" {
			head.Kind = defaults.Kind
		}
	}
	switch {
	case head.Kind == "":
		d.fail(rel, line, 0, errors.New("the object has no kind"))
		return
	case head.APIVersion == "":
		d.fail(rel, line, 0, fmt.Errorf("the %s has no apiVersion", head.Kind))
		return
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		d.fail(rel, line, 0, fmt.Errorf("the %s has an invalid apiVersion: %v", head.Kind, err))
		return
	}
	gvk := gv.WithKind(head.Kind)

	if head.Kind == "List" || (strings.HasSuffix(head.Kind, "List") && head.Items != nil) {
		d.list(rel, line, gvk, head.Items)
		return
	}

	obj, _, err := d.decoder.Decode(j, &gvk, nil)
	switch {
	case runtime.IsNotRegisteredError(err):
		d.logger.Warn("ignoring an object of a kind this program does not know",
			"file", rel, "line", line, "apiVersion", head.APIVersion, "kind", head.Kind)
		return
	case err != nil:
		// Decoder messages name fields and types, never values (a Secret's data stays out).
		d.fail(rel, line, 0, fmt.Errorf("decoding the %s: %v", head.Kind, err))
		return
	}
	d.add(rel, line, obj)
}

func (d *manifestDecoder) list(rel string, line int, gvk schema.GroupVersionKind, items json.RawMessage) {
	var raw []json.RawMessage
	if len(items) > 0 && !bytes.Equal(items, []byte("null")) {
		if err := json.Unmarshal(items, &raw); err != nil {
			d.fail(rel, line, 0, fmt.Errorf("the %s's items are not a list of objects: %v", gvk.Kind, err))
			return
		}
	}
	var defaults *schema.GroupVersionKind
	if gvk.Kind != "List" {
		// Items of a ConfigMapList are ConfigMaps of the list's version.
		itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
		defaults = &itemGVK
	}
	for _, item := range raw {
		d.document(rel, line, item, defaults)
	}
}

// add keeps ConfigMaps, Secrets and Pods, as the API server would store them.
func (d *manifestDecoder) add(rel string, line int, obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if d.first(rel, line, "ConfigMap", &o.ObjectMeta) {
			d.objs.ConfigMaps = append(d.objs.ConfigMaps, o)
		}
	case *corev1.Secret:
		if d.first(rel, line, "Secret", &o.ObjectMeta) {
			foldStringData(o)
			d.objs.Secrets = append(d.objs.Secrets, o)
		}
	case *corev1.Pod:
		if d.first(rel, line, "Pod", &o.ObjectMeta) {
			d.objs.Pods = append(d.objs.Pods, o)
		}
	default:
		gvk := obj.GetObjectKind().GroupVersionKind()
		d.logger.Debug("ignoring an object that is not a ConfigMap, Secret or Pod",
			"file", rel, "line", line, "kind", gvk.Kind, "apiVersion", gvk.GroupVersion().String())
	}
}

// first gives the object its namespace (as kubectl would) and reports whether this is its
// first definition; a second one is an error, since which one won would depend on file names.
func (d *manifestDecoder) first(rel string, line int, kind string, meta *metav1.ObjectMeta) bool {
	if meta.Name == "" {
		d.fail(rel, line, 0, fmt.Errorf("the %s has no metadata.name", kind))
		return false
	}
	if meta.Namespace == "" {
		meta.Namespace = d.defaultNamespace
	}
	k := objectKey{kind, meta.Namespace, meta.Name}
	if prev, ok := d.seen[k]; ok {
		d.fail(rel, line, 0, fmt.Errorf("%s %s/%s is defined twice: first in %s", kind, meta.Namespace, meta.Name, prev))
		return false
	}
	d.seen[k] = fmt.Sprintf("%s line %d", rel, line)
	return true
}

// foldStringData does what the API server does with a Secret's stringData: merge it into data
// (stringData wins) and drop it; and an empty type becomes Opaque.
func foldStringData(s *corev1.Secret) {
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

// badSeparatorLine finds the first line from offset that the YAML reader rejects: "---"
// followed by something other than a comment.
func badSeparatorLine(data []byte, offset int) int {
	line := lineAt(data, offset)
	for _, l := range strings.SplitAfter(string(data[offset:]), "\n") {
		if rest, ok := strings.CutPrefix(l, "---"); ok {
			if rest = strings.TrimSpace(rest); rest != "" && !strings.HasPrefix(rest, "#") {
				return line
			}
		}
		line++
	}
	return 0
}

// lineAt is the 1-based line of the byte at offset.
func lineAt(data []byte, offset int) int {
	offset = max(0, min(offset, len(data)))
	return 1 + bytes.Count(data[:offset], []byte{'\n'})
}

// position converts the offset of a JSON error (bytes read when it was found) into the line
// and column of the offending byte.
func position(data []byte, offset int64) (line, col int) {
	p := max(0, min(int(offset)-1, len(data)))
	before := data[:p]
	return 1 + bytes.Count(before, []byte{'\n'}), p - bytes.LastIndexByte(before, '\n')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
