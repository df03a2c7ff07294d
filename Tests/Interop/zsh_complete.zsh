#!/usr/bin/zsh -f
# Completes a command line in a real interactive zsh (on a pseudo-terminal,
# through the zsh/zpty module) with a completion script loaded by compinit
# from $fpath, and prints the candidates, one a line.
# Usage: zsh -f zsh_complete.zsh COMPLETION_DIR 'devtrust lo'
zmodload zsh/zpty || exit 3
directory=$1 line=$2
zpty capture zsh -f -i
zpty -w capture "PROMPT=''; RPROMPT=''; unsetopt zle_bracketed_paste 2>/dev/null; setopt no_beep"
zpty -w capture "fpath=(${(q)directory} \$fpath); autoload -U compinit; compinit -u -d ${(q)directory}/.zcompdump"
# Each match that completion would add is printed instead, between markers.
zpty -w capture 'compadd () {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
    typeset -a __hits; builtin compadd -A __hits "$@"
    (( $#__hits )) && print -rl -- "" ${__hits[@]/#/MATCH:} > /dev/tty
    builtin compadd -Q -U ""
}'
zpty -w capture 'zstyle ":completion:*" list-prompt ""; zstyle ":completion:*" select-prompt ""; bindkey "^I" complete-word'
zpty -w capture "print DEVTRUST-READY"
zpty -r capture output '*DEVTRUST-READY*DEVTRUST-READY*' || exit 4
zpty -n -w capture "$line"$'\t'
zpty -w capture $'\C-u'"print DEVTRUST-DONE"
output=""
while zpty -r -t capture chunk 2>/dev/null || { sleep 0.05; zpty -r -t capture chunk 2>/dev/null }; do
    output+=$chunk
    [[ $output == *DEVTRUST-DONE*DEVTRUST-DONE* ]] && break
done
zpty -d capture
print -rl -- ${(M)${(f)output//$'\r'/}:#MATCH:*} | sed 's/^MATCH://' | sort -u
