// kernels/cartpole.cu: the initial reset of the CartPole-v1 environments, one thread per env.
//
// The environment step itself (kernels/cartpole.cuh, cp_step_env) runs inside the acting
// kernels (mlp_act_env, c51_act_env): acting and stepping an env are one node of the step.
#include "cartpole.cuh"

/// Resets every environment (used once, in `init`): state uniform in [-0.05, 0.05)^4 from the
/// reset stream at counter step 0 (steps of the run start at 1, so this never collides),
/// episode step counters and running returns to zero.
/// Reads: nothing. Writes: state[n*4] (f64), ep_steps[n], ep_return[n].
/// Launch: 1-D, at least n threads in total (e.g. <<<ceil_div(n, 64), 64>>>).
/// pipec: extent state = n * 4
/// pipec: extent ep_steps = n
/// pipec: extent ep_return = n
/// pipec: out state
/// pipec: out ep_steps
/// pipec: out ep_return
extern "C" __global__ void cartpole_reset_all(double* state, int* ep_steps, float* ep_return,
                                              int n, unsigned int seed) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    double s[4];
    cp_reset_state(s, seed, 0u, (unsigned int)e);
    state[e * 4 + 0] = s[0];
    state[e * 4 + 1] = s[1];
    state[e * 4 + 2] = s[2];
    state[e * 4 + 3] = s[3];
    ep_steps[e] = 0;
    ep_return[e] = 0.0f;
}
