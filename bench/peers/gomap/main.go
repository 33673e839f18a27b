// Command gomap is the plain-Go reference for scripts/bench.sh: net/http
// over a map[string]string of the benchmark's codes, answering 302 with the
// URL (404 if unknown). It reads "code url" lines from -codes.
package main

import (
	"bufio"
	"flag"
	"log"
	"net/http"
	"os"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18680", "listen address")
	codes := flag.String("codes", "", `file of "code url" lines`)
	flag.Parse()
	f, err := os.Open(*codes)
	if err != nil {
		log.Fatal(err)
	}
	links := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if code, url, ok := strings.Cut(sc.Text(), " "); ok {
			links[code] = url
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		url, ok := links[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, url, http.StatusFound)
	})))
}
