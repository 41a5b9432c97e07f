// Command demo-backend serves a one-line HTTP answer on each ADDR=NAME it is given, so the demo
// and the load script have real backends to route to: `demo-backend 127.0.0.11:8080=web-1 ...`.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo-backend ADDR=NAME [ADDR=NAME ...]")
		os.Exit(2)
	}
	errs := make(chan error)
	for _, arg := range os.Args[1:] {
		addr, name, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("argument %q: want ADDR=NAME", arg)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s\n", name, r.Host, r.URL.Path)
		})
		go func() { errs <- http.ListenAndServe(addr, mux) }()
		log.Printf("%s listening on %s", name, addr)
	}
	log.Fatal(<-errs)
}
