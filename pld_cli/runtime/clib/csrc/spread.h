/* When a step of a pass spreads over the cores.

   A prompt's slice (tens to hundreds of rows) gives every core enough of each step to pay for
   waking the other threads; a decode or verify pass (a few rows per document) does not: between a
   user's passes the drafting runs in Python and OpenMP's threads go to sleep, and a pass that woke
   them for a row-wise step measured slower (docs/batching.md). The products and attention's
   scores spread at any size; the steps below them (the input's split, the chunks' combine, the
   norms, residuals, rotations, cache writes and gated SiLU) from SPREAD_ROWS rows. Which core
   computes a row never changes its bits. */

#ifndef PLD_SPREAD_H
#define PLD_SPREAD_H

#define SPREAD_ROWS 64

#endif
