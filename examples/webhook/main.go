// Command webhook is the smallest useful simpleqd webhook: it verifies the
// x-simpleq-signature over the raw body and prints each delivery. Run it
// beside `simpleqd --config simpleqd.example.yaml` to follow the README.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:9000", "address to listen on")
	secret := flag.String("secret", "whsec_demo_secret", "the queue's signingSecret")
	flag.Parse()
	http.HandleFunc("POST /hooks/{queue}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
		if err != nil {
			http.Error(w, "read error", http.StatusBadRequest)
			return
		}
		mac := hmac.New(sha256.New, []byte(*secret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Simpleq-Signature"))) {
			log.Printf("rejected delivery with a bad signature")
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		log.Printf("queue=%s job=%s attempt=%s body=%s", r.PathValue("queue"),
			r.Header.Get("X-Simpleq-Job-Id"), r.Header.Get("X-Simpleq-Attempt"), body)
		w.WriteHeader(http.StatusOK)
	})
	log.Printf("example webhook listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
