// kernels/controllers.cu: the learning-rate plateau controller and the controllers' initial
// state (docs/dqn.md 7). Single-thread kernels: every decision is taken on the device. The
// step's tick (docs/dqn.md 1) runs in the replay push (replay_tick, replay.cu), off the
// acting path.
#include "common.cuh"

/// Learning-rate plateau controller, after the step's learner updates: when
/// *step % check_every == 0 and *learn_on: if *loss_ema < *best * (1 - threshold) then
/// *best = *loss_ema, *bad = 0, else *bad += 1; when *bad >= patience,
/// *lr = max(lr_min, *lr * factor) and *bad = 0. (*best starts at +inf: fill it in init.)
/// Reads: step[1], learn_on[1], loss_ema[1]. Updates: lr[1], best[1], bad[1].
/// Launch: <<<1, 1>>>.
/// pipec: extent step = 1
/// pipec: extent learn_on = 1
/// pipec: extent loss_ema = 1
/// pipec: extent lr = 1
/// pipec: extent best = 1
/// pipec: extent bad = 1
extern "C" __global__ void lr_plateau(const int* step, const int* learn_on, const float* loss_ema,
                                      float* lr, float* best, int* bad, int check_every,
                                      int patience, float factor, float threshold,
                                      float lr_min) {
    pipec_let_dependents_start();  // kernels/pdl.cuh: the next node may start its own set-up
    pipec_wait_for_producer();     // every access below sees the nodes before it
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (learn_on[0] == 0 || step[0] % check_every != 0) return;
    const float ema = loss_ema[0];
    int b = bad[0];
    if (ema < best[0] * (1.0f - threshold)) {
        best[0] = ema;
        b = 0;
    } else {
        b += 1;
    }
    if (b >= patience) {
        lr[0] = fmaxf(lr_min, lr[0] * factor);
        b = 0;
    }
    bad[0] = b;
}

/// Controller state at load time (init block): *lr = lr0, *best = +inf, *bad = 0,
/// *max_prio = 1 (the running max priority of docs/dqn.md), *loss_ema = 0.
/// Reads: nothing. Writes: lr[1], best[1], bad[1], max_prio[1], loss_ema[1].
/// Launch: <<<1, 1>>>.
/// pipec: extent lr = 1
/// pipec: extent best = 1
/// pipec: extent bad = 1
/// pipec: extent max_prio = 1
/// pipec: extent loss_ema = 1
/// pipec: out lr
/// pipec: out best
/// pipec: out bad
/// pipec: out max_prio
/// pipec: out loss_ema
extern "C" __global__ void controllers_init(float* lr, float* best, int* bad, float* max_prio,
                                            float* loss_ema, float lr0) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    lr[0] = lr0;
    best[0] = pipec_inf();
    bad[0] = 0;
    max_prio[0] = 1.0f;
    loss_ema[0] = 0.0f;
}
