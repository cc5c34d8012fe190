# Sourced by the long-run drivers in eval/study/: commit one results folder alone, retried
# while another commit (yours, or another run's) holds the index.
#   commit_results FOLDER "MESSAGE"       (LFS_STUDY_COMMIT=0: copy without committing)
commit_results() {
    [ "${LFS_STUDY_COMMIT:-1}" = 1 ] || return 0
    for _ in 1 2 3 4 5; do
        git add -A -- "$1"
        git diff --cached --quiet -- "$1" && return 0
        git commit -q -m "$2" -- "$1" 2>/dev/null && return 0
        sleep 5
    done
    echo "commit_results: could not commit $1 ($2)" >&2
}
