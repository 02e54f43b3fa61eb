package structural

// Config is the "structural" section of berth.yaml. Every field has a
// default (DefaultConfig), so a missing section is a working one.
type Config struct {
	// Grammars are loaded at start from shared libraries, as ast-grep's
	// custom languages are. Setting the list replaces the default one.
	Grammars []GrammarConfig `yaml:"grammars"`
	// MaxResults is ast_grep's default cap on matches listed.
	MaxResults int `yaml:"max_results"`
	// MaxFileBytes: larger files are skipped, and the result says which.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// Workers parse and match files in parallel; 0 means one per CPU.
	Workers int `yaml:"workers"`
	// DiffLines caps the unified diff shown by ast_edit.
	DiffLines int `yaml:"diff_lines"`
	// CacheBytes bounds the parsed trees one run keeps for repeated
	// queries; past it, further files are parsed but not kept.
	CacheBytes int64 `yaml:"cache_bytes"`
}

// GrammarConfig names a tree-sitter grammar in a shared library.
type GrammarConfig struct {
	// Name is the language id the tools accept ("dart").
	Name string `yaml:"name"`
	// Library is the shared library's path; "~" and $VARS are expanded.
	Library string `yaml:"library"`
	// Symbol is the library's language function ("tree_sitter_dart").
	Symbol string `yaml:"symbol"`
	// Extensions are the file name endings of the language (".dart"; a
	// missing dot is added); required.
	Extensions []string `yaml:"extensions"`
	// Optional entries that fail to load leave the language unavailable
	// (the tools say why when it is asked for) instead of stopping the
	// server. The built-in Dart entry is optional, so a fresh machine
	// without the library still starts; an entry a user adds is required
	// unless it says otherwise.
	Optional bool `yaml:"optional"`
	// Scaffolds are the pattern contexts to try, in order, each with one
	// "%s" where the snippet goes. Empty: the built-in ladder for the
	// language if there is one, else the snippet alone.
	Scaffolds []string `yaml:"scaffolds,omitempty"`
}

// DefaultConfig is the built-in configuration.
func DefaultConfig() Config {
	return Config{
		Grammars: []GrammarConfig{{
			Name:       "dart",
			Library:    "~/.cache/berth/grammars/libtree-sitter-dart.so",
			Symbol:     "tree_sitter_dart",
			Extensions: []string{".dart"},
			Optional:   true,
		}},
		MaxResults:   50,
		MaxFileBytes: 2 << 20,
		DiffLines:    200,
		CacheBytes:   1 << 30,
	}
}
