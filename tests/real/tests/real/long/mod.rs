//! The groups whose tests hold real time longest (health checks held to their timeouts,
//! dependsOn chains, the demo's every step, the image-automation differential run): libtest
//! starts tests in the order of their names and `long` sorts before `short`, so these start
//! first and the short groups fill the threads they leave.
pub mod controller;
pub mod demo;
pub mod markercheck;
pub mod unstick;
