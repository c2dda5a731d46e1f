package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/mdblock"
)

// normalized is text as lines with runs of blanks folded, blank lines left out.
func normalized(text string) []string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return lines
}

func contains(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		if strings.Join(haystack[i:i+len(needle)], "\n") == strings.Join(needle, "\n") {
			return true
		}
	}
	return false
}

// Every Go snippet of docs/trusted-documents.md's embedding section stands,
// line for line, in main.go, which this package builds and runs.
func TestDocsSnippetsCompile(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := mdblock.Fenced(t, mdblock.Section(t, "docs/trusted-documents.md", "## Embedded in your gqlgen server"), "go")
	for _, block := range blocks {
		if !contains(normalized(string(src)), normalized(block)) {
			t.Errorf("a docs snippet is not in main.go (so never compiled):\n%s", block)
		}
	}
	if len(blocks) != 2 {
		t.Errorf("found %d Go snippets, want 2", len(blocks))
	}
}

type answer struct {
	Errors []struct {
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost struct {
			RequestedQueryCost int64 `json:"requestedQueryCost"`
		} `json:"cost"`
	} `json:"extensions"`
}

func post(t *testing.T, h http.Handler, body string) (int, answer) {
	t.Helper()
	req := httptest.NewRequest("POST", "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	return w.Code, a
}

// Both forms serve the list and only the list: Shop by its documentId at
// its price (the package comment's curl), an unlisted document refused.
func TestExampleServesTheList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "persisted-documents.json")
	if err := os.WriteFile(path, persistedDocuments, 0o600); err != nil {
		t.Fatal(err)
	}
	full, err := fromFile(server(), path)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"one call": oneCall(server()), "from a file": full} {
		t.Run(name, func(t *testing.T) {
			status, a := post(t, h, `{"documentId":"sha256:19934132243bbd8a3a8d0f1c48de7f50b0a1ab907f2290ba6eb94d34dcd6591a"}`)
			if status != 200 || len(a.Errors) > 0 || a.Extensions.Cost.RequestedQueryCost != 61 {
				t.Errorf("Shop by documentId: %d %+v, want 200 at 61", status, a)
			}
			status, a = post(t, h, `{"query":"{ products { totalCount } }"}`)
			if status != 400 || len(a.Errors) == 0 || a.Errors[0].Extensions["code"] != "PERSISTED_QUERY_NOT_IN_LIST" {
				t.Errorf("an unlisted document: %d %+v", status, a)
			}
		})
	}
	if err := os.WriteFile(path, []byte(`{"shop":"query Shop { products { nodes { nosuch } } }"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fromFile(server(), path); err == nil || !strings.Contains(err.Error(), `document "shop" (operation Shop): GRAPHQL_VALIDATION_FAILED`) {
		t.Errorf("a list with a document that does not validate: %v", err)
	}
}
