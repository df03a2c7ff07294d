#!/usr/bin/zsh -f
# Completes a command line in a real interactive zsh (on a pseudo-terminal,
# through the zsh/zpty module) with a completion script loaded by compinit
# from $fpath, and prints the candidates, one a line.
# Usage: zsh -f zsh_complete.zsh COMPLETION_DIR 'devtrust lo' [DUMP_FILE]
# compinit's dump goes to DUMP_FILE (default COMPLETION_DIR/.zcompdump).
zmodload zsh/zpty || exit 3
directory=$1 line=$2 dump=${3:-$1/.zcompdump}
zpty capture zsh -f -i
zpty -w capture "PROMPT=''; RPROMPT=''; unsetopt zle_bracketed_paste 2>/dev/null; setopt no_beep"
zpty -w capture "fpath=(${(q)directory} \$fpath); autoload -U compinit; compinit -u -d ${(q)dump}"
# Each match that completion would add is printed instead, between markers.
zpty -w capture 'compadd () {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
    typeset -a __hits; builtin compadd -A __hits "$@"
    (( $#__hits )) && print -rl -- "" ${__hits[@]/#/MATCH:} > /dev/tty
    builtin compadd -Q -U ""
}'
zpty -w capture 'zstyle ":completion:*" list-prompt ""; zstyle ":completion:*" select-prompt ""; bindkey "^I" complete-word'
# compsys calls the functions in comppostfuncs when a completion has ended: the
# marker says so (written "-" quoted, so that the echoed definition is no marker).
zpty -w capture '__devtrust_end () { print -r -- COMPLETION"-"END > /dev/tty }; comppostfuncs=(__devtrust_end)'
zpty -w capture "print DEVTRUST-READY"
zpty -r capture output '*DEVTRUST-READY*DEVTRUST-READY*' || exit 4
zpty -n -w capture "$line"$'\t'
# Wait for the completion to end before typing on: keys typed while it runs
# could reach zle first on a loaded machine. Give up after 120 s.
output=""
integer deadline=$(( SECONDS + 120 ))
while [[ $output != *COMPLETION-END* ]] && (( SECONDS < deadline )); do
    if zpty -r -t capture chunk 2>/dev/null; then output+=$chunk; else sleep 0.05; fi
done
[[ $output == *COMPLETION-END* ]] || { print -u2 "zsh_complete: completion did not end within 120 s"; exit 5 }
zpty -w capture $'\C-u'"print DEVTRUST-DONE"
# Read until the marker comes back (the command line echoed, then its output).
while [[ $output != *DEVTRUST-DONE*DEVTRUST-DONE* ]] && (( SECONDS < deadline )); do
    if zpty -r -t capture chunk 2>/dev/null; then output+=$chunk; else sleep 0.05; fi
done
[[ $output == *DEVTRUST-DONE*DEVTRUST-DONE* ]] || { print -u2 "zsh_complete: no answer within 120 s"; exit 5 }
zpty -d capture
print -rl -- ${(M)${(f)output//$'\r'/}:#MATCH:*} | sed 's/^MATCH://' | sort -u
