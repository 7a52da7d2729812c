package swacache

// Every SWA_API function of include/swacache.h is called by the package (from
// Go as C.swa_x, or from its C wrappers in capi.h and the cgo preambles), or
// is named in omitted with the reason it is left out on purpose. Files behind
// the swacache_experimental build tag count (experimental.go wraps
// swa_slot_set_lengths). A function
// added to the header without a wrapper (or an entry here) fails the test.

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const graphReason = "graph decode: experimental (behind SWACACHE_EXPERIMENTAL), made for CUDA graph " +
	"capture with device pointers and streams; an engine calls it through cgo directly"

var omitted = map[string]string{
	"swa_decode_graph_create":       graphReason,
	"swa_decode_graph_destroy":      graphReason,
	"swa_decode_graph_import":       graphReason,
	"swa_decode_graph_release":      graphReason,
	"swa_decode_graph_plan":         graphReason,
	"swa_decode_graph_step":         graphReason,
	"swa_decode_graph_error_record": graphReason,
	"swa_decode_graph_check":        graphReason,
	"swa_decode_graph_reset_error":  graphReason,
	"swa_plan_create": "Cache.NewPlan and NewPlanWithOptions both call swa_plan_create_with_options; " +
		"swa_plan_create is that call with the default options",
}

var (
	apiDecl    = regexp.MustCompile(`(?m)^SWA_API\b[^(;]*?\b(swa_\w+)\s*\(`)
	goCall     = regexp.MustCompile(`\bC\.(swa_\w+)\b`)
	cCall      = regexp.MustCompile(`\b(swa_\w+)\s*\(`)
	cComment   = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	cgoPreface = regexp.MustCompile(`(?s)/\*(.*?)\*/\s*import "C"`)
)

func headerFunctions(t *testing.T, text string) map[string]bool {
	names := map[string]bool{}
	for _, m := range apiDecl.FindAllStringSubmatch(text, -1) {
		names[m[1]] = true
	}
	if len(names) < 50 {
		t.Fatalf("parsed only %d SWA_API functions from the header", len(names))
	}
	return names
}

// wrappedFunctions lists the header functions the package's own (non-test)
// code calls: C.swa_x in Go, swa_x(...) in capi.h and in cgo preambles.
func wrappedFunctions(t *testing.T) map[string]bool {
	called := map[string]bool{}
	cCode := func(src string) {
		for _, m := range cCall.FindAllStringSubmatch(cComment.ReplaceAllString(src, ""), -1) {
			called[m[1]] = true
		}
	}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if m := cgoPreface.FindStringSubmatch(src); m != nil {
			cCode(m[1]) // A one-line preamble (// #include "capi.h") calls nothing.
		}
		var goCode []string
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "//") {
				goCode = append(goCode, line)
			}
		}
		for _, m := range goCall.FindAllStringSubmatch(strings.Join(goCode, "\n"), -1) {
			called[m[1]] = true
		}
	}
	b, err := os.ReadFile("capi.h")
	if err != nil {
		t.Fatal(err)
	}
	cCode(string(b))
	return called
}

func readHeader(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "include", "swacache.h"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHeaderCoverage(t *testing.T) {
	header, wrapped := headerFunctions(t, readHeader(t)), wrappedFunctions(t)
	var missing, stale, nowWrapped []string
	for name := range header {
		if !wrapped[name] && omitted[name] == "" {
			missing = append(missing, name)
		}
	}
	for name, reason := range omitted {
		if !header[name] {
			stale = append(stale, name)
		}
		if wrapped[name] {
			nowWrapped = append(nowWrapped, name)
		}
		if len(reason) < 20 {
			t.Errorf("omitted[%s] needs a reason", name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	sort.Strings(nowWrapped)
	if len(missing) > 0 {
		t.Errorf("SWA_API functions neither wrapped nor in omitted: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("omitted names functions the header no longer has: %v", stale)
	}
	if len(nowWrapped) > 0 {
		t.Errorf("omitted names functions the package now wraps: %v", nowWrapped)
	}
}

// The check can fail: one more SWA_API function in the header is reported.
func TestHeaderCoverageSeesANewFunction(t *testing.T) {
	header := headerFunctions(t, readHeader(t)+"\nSWA_API swa_status_t swa_brand_new(swa_cache_t* c);\n")
	if !header["swa_brand_new"] || wrappedFunctions(t)["swa_brand_new"] {
		t.Fatal("a new SWA_API function went unnoticed")
	}
}
