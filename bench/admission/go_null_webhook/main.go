// B3's compiled anchor: the least an admission webhook written in Go costs on this machine.
//
// go-null-webhook PORT CERT KEY serves /hints over TLS on loopback and answers every
// AdmissionReview allowed, with no patch. Only the standard library.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
)

type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID string `json:"uid"`
	} `json:"request,omitempty"`
	Response *response `json:"response,omitempty"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

func admit(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	out := review{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview",
		Response: &response{UID: in.Request.UID, Allowed: true}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: go-null-webhook PORT CERT KEY")
	}
	http.HandleFunc("/hints", admit)
	log.Print("null webhook serving")
	log.Fatal(http.ListenAndServeTLS("127.0.0.1:"+os.Args[1], os.Args[2], os.Args[3], nil))
}
