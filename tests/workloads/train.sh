#!/bin/sh
# A shell script that runs the training: the hook must still reach python.
echo "from the shell"
exec python "$(dirname "$0")/no_loader.py"
