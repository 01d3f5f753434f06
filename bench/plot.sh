#!/bin/sh
# Size sweep and its picture: per-item cost against filter size.
#
#   bench/plot.sh              run bench/sweep.pl (minutes), draw the plot,
#                              copy both to bench/sweep.dat and bench/sweep.png
#   bench/plot.sh --quick      a shorter sweep; leaves bench/out/ only
#   bench/plot.sh --plot-only  redraw from the existing bench/out/sweep.dat
#   other arguments go to bench/sweep.pl (e.g. --nice=-10)
#
# Run from the top of a built tree (perl Makefile.PL && make). Needs gnuplot
# (Debian: gnuplot-nox).
set -eu

cd "$(dirname "$0")/.."
mkdir -p bench/out
dat=bench/out/sweep.dat
png=bench/out/sweep.png

mode=full
args=
for a in "$@"; do
  case $a in
    --quick) mode=quick ;;
    --plot-only) mode=plot ;;
    *) args="$args $a" ;;
  esac
done

command -v gnuplot >/dev/null || { echo "gnuplot is not installed" >&2; exit 1; }

case $mode in
  full) perl -Mblib bench/sweep.pl $args --out "$dat" ;;
  quick) perl -Mblib bench/sweep.pl --quick $args --out "$dat" ;;
esac

# Cache sizes and the run's description, from the data file's comments.
cache() { awk -v l="$1" '$1 == "#" && $2 == "cache" && $3 == l { print $4 }' "$dat"; }
l2=$(cache L2)
l3=$(cache L3)
when=$(sed -n '1s/^# //p' "$dat")
thp=$(sed -n 's/^# shmem_enabled.*: \(\[.*\]\)$/\1/p' "$dat")
xmin=$(awk '!/^#/ && NF { print $1; exit }' "$dat")
xmax=$(awk '!/^#/ && NF { x = $1 } END { print x }' "$dat")
marks=
for c in "L2 $l2" "L3 $l3"; do
  set -- $c
  [ $# -eq 2 ] || continue
  marks="$marks
set arrow from $2, graph 0 to $2, graph 1 nohead dt 2 lc rgb 'gray40'
set label '$1' at $2, graph 0.97 offset 0.5,0 tc rgb 'gray40'"
done

gnuplot <<EOF
set terminal pngcairo size 1000,700 font "sans,11"
set output "$png"
set title "Data::BloomFilter::Shared: cost per item, filter half full (k = 7)\n{/*0.8 $when; THP for shmem $thp}"
set xlabel "bytes of bits"
set ylabel "CPU ns per item"
set logscale x 2
set xtics ("64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304, \
           "16M" 16777216, "64M" 67108864, "256M" 268435456)
set xrange [$xmin / 1.3 : $xmax * 1.3]
set yrange [0:*]
set grid
set key outside below center horizontal maxcols 2 box
set bmargin 9
set datafile commentschars "#"
$marks
plot "$dat" using 1:3 with linespoints lw 2 pt 7 title "contains (single calls, present items)", \
     "" using 1:4 with linespoints lw 2 pt 5 title "add (single calls, new items)", \
     "" using 1:5 with linespoints lw 2 pt 9 title "contains\\\\_many (batches of 1000)", \
     "" using 1:6 with linespoints lw 2 pt 11 title "add\\\\_many (batches of 1000)", \
     "" using 1:2 with lines dt 3 lw 2 lc "black" title "baseline: accessor call \\\$f->bits"
EOF
echo "wrote $png"

if [ "$mode" = full ]; then
  cp "$dat" bench/sweep.dat
  cp "$png" bench/sweep.png
  echo "copied to bench/sweep.dat and bench/sweep.png (committed)"
fi
