// kernels/cartpole.cuh: CartPole-v1 exactly as Gymnasium 1.x defines it, per env, for the
// kernels that step the environments (mlp_act_push in mlp_act.cu, c51_act_env in c51.cu: acting
// and the environment step in one node) and cartpole_reset_all (cartpole.cu).
//
// State in float64 as Gymnasium computes it. The physics uses explicitly rounded double
// operations (__dadd_rn, __dmul_rn, ...) so that the compiler cannot contract them into fused
// multiply-adds: every operation rounds as NumPy's does, in NumPy's order. (sin and cos come
// from CUDA's libdevice and may differ from the host's libm in the last bit.)
#pragma once

#include "common.cuh"

#define CP_GRAVITY 9.8
#define CP_MASSCART 1.0
#define CP_MASSPOLE 0.1
#define CP_LENGTH 0.5
#define CP_FORCE 10.0
#define CP_TAU 0.02
#define CP_X_THRESHOLD 2.4

// Reset state of env `env` at counter `step`: uniform in [-0.05, 0.05) per component
// (low + (high - low) * u, as NumPy's uniform), 53-bit uniforms from two Philox blocks.
__device__ __forceinline__ void cp_reset_state(double* s, unsigned int seed, unsigned int step,
                                               unsigned int env) {
    const pipec_u4 r0 = pipec_philox(step, env, 0u, 0u, seed, PIPEC_STREAM_RESET);
    const pipec_u4 r1 = pipec_philox(step, env, 1u, 0u, seed, PIPEC_STREAM_RESET);
    const double u0 = pipec_u01d(r0.x, r0.y);
    const double u1 = pipec_u01d(r0.z, r0.w);
    const double u2 = pipec_u01d(r1.x, r1.y);
    const double u3 = pipec_u01d(r1.z, r1.w);
    const double lo = -0.05, span = __dsub_rn(0.05, -0.05);
    s[0] = __dadd_rn(lo, __dmul_rn(span, u0));
    s[1] = __dadd_rn(lo, __dmul_rn(span, u1));
    s[2] = __dadd_rn(lo, __dmul_rn(span, u2));
    s[3] = __dadd_rn(lo, __dmul_rn(span, u3));
}

// Whether the state after a step, at position x and angle theta, ends the episode by
// termination (|x| > 2.4 or |theta| > 12 * 2 * pi / 360).
__device__ __forceinline__ bool cp_terminated(double x, double theta) {
    const double theta_threshold = 12.0 * 2.0 * 3.141592653589793 / 360.0;
    return x < -CP_X_THRESHOLD || x > CP_X_THRESHOLD || theta < -theta_threshold ||
           theta > theta_threshold;
}

// The done code (PIPEC_DONE_*) the next step of an env in state s (x, x_dot, theta,
// theta_dot) at episode step t will report, known before acting: Euler integration moves x
// and theta by the old velocities, so the step's new position and angle, and so its
// termination, do not depend on the action (cp_step_env computes them in the same operations).
__device__ __forceinline__ int cp_done_after(const double* s, int t, int max_steps) {
    const double x = __dadd_rn(s[0], __dmul_rn(CP_TAU, s[1]));
    const double theta = __dadd_rn(s[2], __dmul_rn(CP_TAU, s[3]));
    if (cp_terminated(x, theta)) return PIPEC_DONE_TERMINATED;
    return (t + 1 >= max_steps) ? PIPEC_DONE_TRUNCATED : PIPEC_DONE_NONE;
}

// Steps env e of step s once with action a (0 or 1; Gymnasium CartPole-v1, Euler
// integration): reward 1 on every step including the last; terminated when |x| > 2.4 or
// |theta| > 12 * 2 * pi / 360; truncated when the episode reaches max_steps steps. On
// terminated or truncated the env resets (reset stream keyed by (seed, s, e)) and its running
// return is reported in fin_return.
// Updates: state[e*4 .. e*4+3] (f64; pre-step state in, next observation's state out: the
//   reset state when the episode ended), ep_steps[e] (steps since reset), ep_return[e].
// Writes: next_obs[e*4 ..] (f32 post-step state, before any reset: the transition's next
//   observation), reward[e], step_info[e*2 ..] = (t, done) with t the episode step before
//   this step's increment and done 0 running / 1 terminated / 2 truncated only,
//   fin_return[e] (the finished episode's return when done, else 0).
// What a step reported, for a caller that goes on with it (the acting kernel's push).
struct CpStep {
    int t, done;
    float reward;
    float next_obs[4];
};

__device__ __forceinline__ CpStep cp_step_env(int e, int a, unsigned int s, double* state,
                                            int* ep_steps, float* ep_return, float* next_obs,
                                            float* reward, int* step_info, float* fin_return,
                                            unsigned int seed, int max_steps) {
    double x = state[e * 4 + 0];
    double x_dot = state[e * 4 + 1];
    double theta = state[e * 4 + 2];
    double theta_dot = state[e * 4 + 3];

    const double total_mass = __dadd_rn(CP_MASSPOLE, CP_MASSCART);
    const double polemass_length = __dmul_rn(CP_MASSPOLE, CP_LENGTH);
    const double force = (a == 1) ? CP_FORCE : -CP_FORCE;
    const double costheta = cos(theta);
    const double sintheta = sin(theta);
    // temp = (force + polemass_length * theta_dot^2 * sintheta) / total_mass
    const double temp = __ddiv_rn(
        __dadd_rn(force,
                  __dmul_rn(__dmul_rn(polemass_length, __dmul_rn(theta_dot, theta_dot)),
                            sintheta)),
        total_mass);
    // thetaacc = (g * sin - cos * temp) / (length * (4/3 - masspole * cos^2 / total_mass))
    const double num = __dsub_rn(__dmul_rn(CP_GRAVITY, sintheta), __dmul_rn(costheta, temp));
    const double den = __dmul_rn(
        CP_LENGTH,
        __dsub_rn(4.0 / 3.0,
                  __ddiv_rn(__dmul_rn(CP_MASSPOLE, __dmul_rn(costheta, costheta)), total_mass)));
    const double thetaacc = __ddiv_rn(num, den);
    // xacc = temp - polemass_length * thetaacc * costheta / total_mass
    const double xacc = __dsub_rn(
        temp,
        __ddiv_rn(__dmul_rn(__dmul_rn(polemass_length, thetaacc), costheta), total_mass));

    x = __dadd_rn(x, __dmul_rn(CP_TAU, x_dot));
    x_dot = __dadd_rn(x_dot, __dmul_rn(CP_TAU, xacc));
    theta = __dadd_rn(theta, __dmul_rn(CP_TAU, theta_dot));
    theta_dot = __dadd_rn(theta_dot, __dmul_rn(CP_TAU, thetaacc));

    const bool terminated = cp_terminated(x, theta);
    const int t = ep_steps[e];
    const bool truncated = (t + 1) >= max_steps;
    const float r = 1.0f;
    const float ret = ep_return[e] + r;

    CpStep out;
    out.t = t;
    out.done = terminated ? PIPEC_DONE_TERMINATED
                          : (truncated ? PIPEC_DONE_TRUNCATED : PIPEC_DONE_NONE);
    out.reward = r;
    out.next_obs[0] = (float)x;
    out.next_obs[1] = (float)x_dot;
    out.next_obs[2] = (float)theta;
    out.next_obs[3] = (float)theta_dot;
#pragma unroll
    for (int c = 0; c < 4; ++c) next_obs[e * 4 + c] = out.next_obs[c];
    reward[e] = r;
    step_info[e * 2 + 0] = t;
    step_info[e * 2 + 1] = out.done;

    if (terminated || truncated) {
        double rs[4];
        cp_reset_state(rs, seed, s, (unsigned int)e);
        x = rs[0];
        x_dot = rs[1];
        theta = rs[2];
        theta_dot = rs[3];
        fin_return[e] = ret;
        ep_return[e] = 0.0f;
        ep_steps[e] = 0;
    } else {
        fin_return[e] = 0.0f;
        ep_return[e] = ret;
        ep_steps[e] = t + 1;
    }
    state[e * 4 + 0] = x;
    state[e * 4 + 1] = x_dot;
    state[e * 4 + 2] = theta;
    state[e * 4 + 3] = theta_dot;
    return out;
}
