// Package deploy_test checks the operations files under deploy/: the
// Prometheus rules with promtool, every PromQL expression of the rules and
// the dashboard with Prometheus's own parser against the metrics Berth
// exports, the Kubernetes manifests with their Go types, and the whole
// against a real Prometheus scraping a real Berth. It is a module of its
// own so that Prometheus's and Kubernetes's modules never reach Berth's.
package deploy_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/berth-dev/berth/orchestrator/metrics"
)

const (
	rulesFile     = "prometheus/berth.rules.yml"
	rulesTestFile = "prometheus/berth.rules.test.yml"
	dashboardFile = "grafana/berth.json"
	dashboardUID  = "berth-overview"
)

// promtool is Debian's, from the prometheus package scripts/setup
// installs; a machine without it fails these tests rather than skip them.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH: install Debian's prometheus package (scripts/setup does): %v", err)
	}
	return p
}

// Issue 15 item 2: the rules pass promtool's check, and its unit tests
// (each alert fired by its own input series with exact labels and
// annotations, and not fired before its for:).
func TestPromtoolCheckAndTestRules(t *testing.T) {
	pt := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(pt, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Issue 15 item 2: every alert has a promtool test that fires it and one
// before its for: where it does not, and its annotations.
func TestEveryAlertIsTested(t *testing.T) {
	groups := loadRules(t)
	tested := testedAlerts(t)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s", r.Alert, a)
				}
			}
			anchor := "deploy/RUNBOOK.md#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], anchor) {
				t.Errorf("alert %s: runbook_url %q does not point at %s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			runbook, err := os.ReadFile("RUNBOOK.md")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(runbook), "\n## "+r.Alert+"\n") {
				t.Errorf("RUNBOOK.md has no section for %s", r.Alert)
			}
			c := tested[r.Alert]
			if !c.fires || !c.quiet {
				t.Errorf("alert %s: promtool tests fire it: %v, show it quiet before its for: %v", r.Alert, c.fires, c.quiet)
			}
		}
	}
}

type alertCases struct{ fires, quiet bool }

// testedAlerts reads which alerts the promtool tests expect to fire and
// to stay quiet.
func testedAlerts(t *testing.T) map[string]alertCases {
	t.Helper()
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &f, false)
	out := map[string]alertCases{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			c := out[a.Alertname]
			if len(a.ExpAlerts) > 0 {
				c.fires = true
			} else {
				c.quiet = true
			}
			out[a.Alertname] = c
		}
	}
	return out
}

// loadRules parses the rules file as Prometheus does, unknown fields
// refused.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promqlParser(), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	return groups
}

func promqlParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) (dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, b
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// panelExprs returns each panel's expressions by panel title.
func panelExprs(d dashboard) map[string][]string {
	out := map[string][]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	return out
}

// exportedNames are the series names a real Berth registry serves: its
// collectors built and gathered, histograms with their _bucket, _sum and
// _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test")
	m.KnowTool("eval", "exec")
	m.KnowLSPServer("gopls")
	m.LSPRequestDuration.WithLabelValues("gopls", "textDocument/definition")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// labelValuesRE matches a Grafana label_values(selector, label) query.
var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)

// Issue 15 item 4: every expression of the rules and the dashboard
// parses with Prometheus's parser, names only series Berth exports (or
// the rules record, or Prometheus's up), and the dashboard's panel ids
// are unique, its uid fixed and its datasource a variable.
func TestExpressionsParseAndNameBerthsMetrics(t *testing.T) {
	known := exportedNames(t)
	known["up"] = true
	groups := loadRules(t)
	type source struct{ where, expr string }
	var exprs []source
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = true
			}
			exprs = append(exprs, source{g.Name + "/" + r.Record + r.Alert, r.Expr})
		}
	}
	d, raw := loadDashboard(t)
	for title, es := range panelExprs(d) {
		for _, e := range es {
			exprs = append(exprs, source{"panel " + title, e})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		exprs = append(exprs, source{"variable " + v.Name, m[1]})
	}
	p := promqlParser()
	used := map[string]bool{}
	for _, s := range exprs {
		expr, err := p.ParseExpr(s.expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", s.where, s.expr, err)
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				used[vs.Name] = true
				if !known[vs.Name] {
					t.Errorf("%s: %q names %s, which Berth does not export", s.where, s.expr, vs.Name)
				}
			}
			return nil
		})
	}
	t.Logf("%d expressions parsed, naming %d series", len(exprs), len(used))

	if d.UID != dashboardUID {
		t.Errorf("dashboard uid is %q, want the fixed %q", d.UID, dashboardUID)
	}
	ids := map[int]string{}
	for _, pn := range allPanels(d.Panels) {
		if pn.ID == 0 {
			t.Errorf("panel %q has no id", pn.Title)
		}
		if other, dup := ids[pn.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, pn.Title, pn.ID)
		}
		ids[pn.ID] = pn.Title
	}
	if strings.Contains(string(raw), "__inputs") || strings.Contains(string(raw), "${DS_") {
		t.Errorf("%s has export placeholders (__inputs, ${DS_...}), which file provisioning cannot fill", dashboardFile)
	}
	var hasDS bool
	for _, v := range d.Templating.List {
		hasDS = hasDS || (v.Type == "datasource" && v.Name == "datasource")
	}
	if !hasDS {
		t.Errorf("%s has no datasource template variable", dashboardFile)
	}
	uids := map[string]string{}
	files, _ := filepath.Glob("grafana/*.json")
	for _, f := range files {
		var other dashboard
		b, _ := os.ReadFile(f)
		if err := json.Unmarshal(b, &other); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if prev, dup := uids[other.UID]; dup {
			t.Errorf("%s and %s share uid %q", prev, f, other.UID)
		}
		uids[other.UID] = f
	}
}

// Issue 15 item 3: the dashboard has the rows the issue lists.
func TestDashboardHasItsRows(t *testing.T) {
	d, _ := loadDashboard(t)
	var rows []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	want := []string{"Runs and connections", "Sessions by kind and driver", "Ends by reason (idle, TTL, crashed)",
		"Tool calls, errors and latency by tool", "Bridge and stuck calls", "Enclosures", "Language servers", "Process"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("rows are %q, want %q", rows, want)
	}
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name    string `yaml:"name"`
			Type    string `yaml:"type"`
			Folder  string `yaml:"folder"`
			OrgID   int    `yaml:"orgId"`
			Options struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
			DisableDeletion       bool `yaml:"disableDeletion"`
			AllowUIUpdates        bool `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int  `yaml:"updateIntervalSeconds"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning.yaml", &prov, true)
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options.Path == "" {
		t.Errorf("grafana/provisioning.yaml is not one file provider with a path: %+v", prov)
	}
}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The metrics page's table (docs/operations/metrics.md) names every metric
// Berth exports, and each has a help text (issue 15 item 1; the table
// moved there from the README).
func TestMetricsDocListsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("../docs/operations/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics.New(reg, "test")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "berth_") {
			continue
		}
		if !strings.Contains(string(readme), "| `"+f.GetName()+"` |") {
			t.Errorf("docs/operations/metrics.md's table lacks %s: add a row for it", f.GetName())
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", f.GetName())
		}
	}
}
