package content

import (
	"bytes"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SecretLines are the lines of a rendering's files that hold bytes derived from a secret value
// (the stats password, an environment value marked secret, however the template transformed
// it): by file as the generation names it (ConfigName, "maps/NAME", "files/NAME"), the
// 1-based line numbers, ascending. The renderer knows them (the template engine marks what
// comes from a secret); no message quotes them: not the rendered line a rejection shows, not
// HAProxy's own words about them.
type SecretLines map[string][]int

// ConfigName is the configuration's name in SecretLines.
const ConfigName = "haproxy.cfg"

// Withheld stands for a line holding a secret; WithheldWords for HAProxy's words about one.
const (
	Withheld      = "[a line holding a secret]"
	WithheldWords = ": [withheld: the line holds a secret]"
)

// Add records the lines of data, the file named file, that spans cover: offsets into data
// (start, end, start, end..., in order), as the template engine gives them. A nil s is
// made when there is anything to record.
func (s *SecretLines) Add(file string, data []byte, spans []int) {
	if len(spans) == 0 {
		return
	}
	if *s == nil {
		*s = SecretLines{}
	}
	var lines []int
	line, counted := 1, 0 // the line at offset counted
	for i := 0; i+1 < len(spans); i += 2 {
		start, end := spans[i], spans[i+1]
		if end <= start || start < counted || end > len(data) {
			continue
		}
		line += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		last := line + bytes.Count(data[start:end-1], []byte{'\n'})
		for l := line; l <= last; l++ {
			if len(lines) == 0 || lines[len(lines)-1] < l {
				lines = append(lines, l)
			}
		}
	}
	(*s)[file] = lines
}

// Holds reports whether line of file holds a secret.
func (s SecretLines) Holds(file string, line int) bool {
	_, found := slices.BinarySearch(s[file], line)
	return found
}

// Quote is the text of line (1-based) of data, trimmed, as a message quotes it: Withheld when
// it holds a secret; "" when data has no such line.
func (s SecretLines) Quote(file string, data []byte, line int) string {
	if line <= 0 {
		return ""
	}
	rest := data
	for i := 1; i < line; i++ {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return ""
		}
		rest = rest[nl+1:]
	}
	if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[:nl]
	} else if len(rest) == 0 {
		return ""
	}
	if s.Holds(file, line) {
		return Withheld
	}
	return strings.TrimSpace(string(rest))
}

// position is how HAProxy names a place in a file: "[/etc/haproxy/haproxy.cfg:12]".
var position = regexp.MustCompile(`\[([^\[\]\s]+):(\d+)\]`)

// Withhold returns HAProxy's output (haproxy -c, a refused reload's start-up logs, the Data
// Plane API's errors) with its words about lines holding a secret withheld: a message line
// that names such a line of the configuration ("parsing [FILE:N]"), or a map file or other file
// with such lines, keeps what comes before the position and loses the rest, which may quote
// the line; HAProxy's continuation lines of it ("   | ...") go too. Positions in files that
// are none of the rendering's map files and other files are the configuration's (haproxy -c
// runs on a copy of it under another name).
func (s SecretLines) Withhold(output string) string {
	if len(s) == 0 {
		return output
	}
	var b strings.Builder
	dropping := false
	for i, l := range strings.Split(output, "\n") {
		if dropping && strings.HasPrefix(strings.TrimSpace(l), "|") {
			continue
		}
		dropping = false
		if cut, ok := s.secretAt(l); ok {
			l, dropping = l[:cut]+" "+WithheldWords, true
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

// secretAt finds in one line of HAProxy's output a mention of a line holding a secret: where
// to cut it (after the position, or before the file's name), ok false when there is none.
func (s SecretLines) secretAt(l string) (int, bool) {
	for _, m := range position.FindAllStringSubmatchIndex(l, -1) {
		file := s.fileOf(l[m[2]:m[3]])
		n, _ := strconv.Atoi(l[m[4]:m[5]])
		if s.Holds(file, n) {
			return m[1], true
		}
	}
	for file, secret := range s {
		if file == ConfigName || len(secret) == 0 {
			continue
		}
		// A map or other file with a secret: HAProxy names it by its path and may quote a
		// line of it in the same message.
		if i := strings.Index(l, "/"+file); i >= 0 {
			return i, true
		}
	}
	return 0, false
}

// fileOf is the file of SecretLines a path HAProxy names is: a map file, another file, else
// the configuration.
func (s SecretLines) fileOf(p string) string {
	dir, name := path.Split(p)
	if d := path.Base(strings.TrimSuffix(dir, "/")); d == "maps" || d == "files" {
		if _, ok := s[d+"/"+name]; ok {
			return d + "/" + name
		}
	}
	return ConfigName
}
