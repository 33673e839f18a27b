package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// checkJSONContentType refuses bodies not declared as JSON
// (application/json, application/merge-patch+json or another +json type). A
// missing Content-Type is refused too: what a cross-site form can send
// (form types, text/plain) never passes, so a page on another site cannot
// make a browser write here.
func checkJSONContentType(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &requestError{status: http.StatusUnsupportedMediaType, kind: "unsupported-media-type",
		title: "Unsupported Media Type", detail: "send the body as application/json (Content-Type: application/json)"}
}

// readJSON decodes one JSON value from the size-limited body into v,
// refusing unknown fields and trailing data.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return readJSONLimit(w, r, v, s.maxBody)
}

// readJSONLimit is readJSON with its own body limit.
func readJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err, limit)
		}
		return badRequest("malformed-json", "the body must hold exactly one JSON value")
	}
	return nil
}

func jsonError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return &requestError{status: http.StatusRequestEntityTooLarge, kind: "body-too-large",
			title: "Content Too Large", detail: fmt.Sprintf("the body is over %d bytes", limit)}
	case errors.Is(err, io.EOF):
		return badRequest("malformed-json", "the body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed-json", "the body ends in the middle of a JSON value")
	case errors.As(err, &se):
		return badRequest("malformed-json", fmt.Sprintf("malformed JSON at byte %d", se.Offset))
	case errors.As(err, &te):
		re := badRequest("invalid-input", fmt.Sprintf("field %q must be %s", te.Field, jsonKind(te.Type.Kind().String()))).(*requestError)
		re.field = te.Field
		return re
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		re := badRequest("unknown-field", fmt.Sprintf("unknown field %q", f)).(*requestError)
		re.field = f
		return re
	}
	return badRequest("malformed-json", err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "uint64", "int32", "uint32":
		return "an integer"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "of another type"
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}
