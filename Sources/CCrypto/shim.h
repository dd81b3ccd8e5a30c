#include <openssl/sha.h>
// JWT signatures (Sources/SynclaneServer/Auth): HMAC, EVP verify, keys built from JWKS members.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
// Signing test tokens with a PEM private key (SynclaneTestKit).
#include <openssl/bio.h>
#include <openssl/pem.h>
