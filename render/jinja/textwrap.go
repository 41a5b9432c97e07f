package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// textWrap is Python's textwrap.wrap(line, width, expand_tabs=False,
// replace_whitespace=False, break_long_words, break_on_hyphens), as Jinja2's wordwrap calls
// it.
func textWrap(text string, width int, breakLong, hyphens bool) []string {
	chunks := wrapChunks(text, hyphens)
	// Reversed, so that chunks can be popped off the end.
	for i, j := 0, len(chunks)-1; i < j; i, j = i+1, j-1 {
		chunks[i], chunks[j] = chunks[j], chunks[i]
	}
	rlen := func(s string) int { return utf8.RuneCountInString(s) }
	isSpace := func(s string) bool { return strings.TrimFunc(s, isPySpace) == "" }
	var lines []string
	for len(chunks) > 0 {
		var cur []string
		curLen := 0
		if isSpace(chunks[len(chunks)-1]) && len(lines) > 0 {
			chunks = chunks[:len(chunks)-1]
		}
		for len(chunks) > 0 {
			l := rlen(chunks[len(chunks)-1])
			if curLen+l > width {
				break
			}
			cur = append(cur, chunks[len(chunks)-1])
			chunks = chunks[:len(chunks)-1]
			curLen += l
		}
		if len(chunks) > 0 && rlen(chunks[len(chunks)-1]) > width {
			// A chunk too long for any line.
			spaceLeft := width - curLen
			if width < 1 {
				spaceLeft = 1
			}
			if breakLong {
				chunk := []rune(chunks[len(chunks)-1])
				end := spaceLeft
				if hyphens && len(chunk) > spaceLeft {
					if h := strings.LastIndex(string(chunk[:spaceLeft]), "-"); h > 0 {
						hr := utf8.RuneCountInString(string(chunk[:spaceLeft])[:h])
						if strings.Trim(string(chunk[:hr]), "-") != "" {
							end = hr + 1
						}
					}
				}
				cur = append(cur, string(chunk[:end]))
				chunks[len(chunks)-1] = string(chunk[end:])
			} else if len(cur) == 0 {
				cur = append(cur, chunks[len(chunks)-1])
				chunks = chunks[:len(chunks)-1]
			}
		}
		if len(cur) > 0 && isSpace(cur[len(cur)-1]) {
			cur = cur[:len(cur)-1]
		}
		if len(cur) > 0 {
			lines = append(lines, strings.Join(cur, ""))
		}
	}
	return lines
}

func isWrapSpace(r rune) bool {
	return r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == ' '
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func isLetterNotDigit(r rune) bool { return isWordChar(r) && !unicode.IsDigit(r) }

// wrapChunks splits text into whitespace runs and words, splitting hyphenated words after
// their hyphens as textwrap's wordsep_re does.
func wrapChunks(text string, hyphens bool) []string {
	var chunks []string
	rs := []rune(text)
	i := 0
	for i < len(rs) {
		j := i
		if isWrapSpace(rs[i]) {
			for j < len(rs) && isWrapSpace(rs[j]) {
				j++
			}
			chunks = append(chunks, string(rs[i:j]))
			i = j
			continue
		}
		for j < len(rs) && !isWrapSpace(rs[j]) {
			j++
		}
		word := rs[i:j]
		if !hyphens {
			chunks = append(chunks, string(word))
			i = j
			continue
		}
		start := 0
		for k := 0; k < len(word); k++ {
			if word[k] != '-' || k == 0 {
				continue
			}
			// A hyphen that ends a word part: letters before it (two, or letter-hyphen-letter)
			// and a letter (maybe after one more hyphen) and a letter after it.
			before := k >= 2 && isLetterNotDigit(word[k-1]) && isLetterNotDigit(word[k-2]) ||
				k >= 3 && isLetterNotDigit(word[k-1]) && word[k-2] == '-' && isLetterNotDigit(word[k-3])
			after := k+1 < len(word) && isLetterNotDigit(word[k+1]) && (k+2 < len(word) && isLetterNotDigit(word[k+2]) ||
				k+3 < len(word) && word[k+2] == '-' && isLetterNotDigit(word[k+3]))
			if before && after && k-start > 0 {
				chunks = append(chunks, string(word[start:k+1]))
				start = k + 1
			}
		}
		chunks = append(chunks, string(word[start:]))
		i = j
	}
	return chunks
}
