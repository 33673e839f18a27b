package main

import (
	"fmt"
	"io"
	"strings"
)

// runCompletion is linknode completion bash|zsh|fish: a script that
// completes linknode's subcommands, to be sourced by the shell:
//
//	source <(linknode completion bash)
//	linknode completion zsh > "${fpath[1]}/_linknode"
//	linknode completion fish > ~/.config/fish/completions/linknode.fish
func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stderr, "Usage of linknode completion: linknode completion bash|zsh|fish")
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: linknode completion bash|zsh|fish")
		return 2
	}
	var names []string
	for _, g := range commandGroups {
		for _, c := range g.commands {
			names = append(names, strings.Fields(c[0])[0])
		}
	}
	words := strings.Join(names, " ")
	switch args[0] {
	case "bash":
		fmt.Fprintf(stdout, `# bash completion for linknode: source <(linknode completion bash)
_linknode() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W %q -- "$cur"))
  elif [ "${COMP_WORDS[1]}" = completion ]; then
    COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _linknode linknode
`, words)
	case "zsh":
		fmt.Fprintf(stdout, `#compdef linknode
# zsh completion for linknode: linknode completion zsh > "${fpath[1]}/_linknode"
_linknode() {
  if (( CURRENT == 2 )); then
    compadd -- %s
  elif [[ $words[2] == completion ]]; then
    compadd -- bash zsh fish
  else
    _files
  fi
}
_linknode "$@"
`, words)
	case "fish":
		fmt.Fprintf(stdout, "# fish completion for linknode: linknode completion fish > ~/.config/fish/completions/linknode.fish\n"+
			"complete -c linknode -n __fish_use_subcommand -f -a %q\n"+
			"complete -c linknode -n '__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'\n", words)
	default:
		fmt.Fprintf(stderr, "linknode completion: %q is not bash, zsh or fish\n", args[0])
		return 2
	}
	return 0
}
