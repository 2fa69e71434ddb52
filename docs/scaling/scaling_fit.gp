set terminal pngcairo size 1100,650 enhanced font 'DejaVu Sans,11'
set output 'scaling_fit.png'
set title 'L(N,D) = 0.000 + 4.974/N^{0.106} + 456.2/D^{0.507}   (a = 0.827, b = 0.173)'
set logscale x
set xlabel 'training tokens D'
set ylabel 'final validation loss (nats/token)'
set grid
set key outside right top box
set format x '10^{%L}'
plot 'scaling_n0_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#1b9e77' title 'N = 2.54e+04 (measured)', \
     'scaling_n0_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#1b9e77' title 'N = 2.54e+04 (fit)', \
     'scaling_n1_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#d95f02' title 'N = 7.56e+04 (measured)', \
     'scaling_n1_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#d95f02' title 'N = 7.56e+04 (fit)', \
     'scaling_n2_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#7570b3' title 'N = 1.25e+05 (measured)', \
     'scaling_n2_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#7570b3' title 'N = 1.25e+05 (fit)', \
     'scaling_n3_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#e7298a' title 'N = 3.74e+05 (measured)', \
     'scaling_n3_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#e7298a' title 'N = 3.74e+05 (fit)'
set terminal svg size 1100,650 enhanced font 'DejaVu Sans,11' background '#ffffff'
set output 'scaling_fit.svg'
set title 'L(N,D) = 0.000 + 4.974/N^{0.106} + 456.2/D^{0.507}   (a = 0.827, b = 0.173)'
set logscale x
set xlabel 'training tokens D'
set ylabel 'final validation loss (nats/token)'
set grid
set key outside right top box
set format x '10^{%L}'
plot 'scaling_n0_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#1b9e77' title 'N = 2.54e+04 (measured)', \
     'scaling_n0_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#1b9e77' title 'N = 2.54e+04 (fit)', \
     'scaling_n1_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#d95f02' title 'N = 7.56e+04 (measured)', \
     'scaling_n1_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#d95f02' title 'N = 7.56e+04 (fit)', \
     'scaling_n2_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#7570b3' title 'N = 1.25e+05 (measured)', \
     'scaling_n2_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#7570b3' title 'N = 1.25e+05 (fit)', \
     'scaling_n3_points.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#e7298a' title 'N = 3.74e+05 (measured)', \
     'scaling_n3_fit.dat' using 1:2 with lines lw 2 dt 2 lc rgb '#e7298a' title 'N = 3.74e+05 (fit)'
unset output
